"""The reference for spread's Muon (tests/test_muon.cpp): torch.optim.Muon of the reference environment run for a few
steps on seeded matrices and gradients, a wide, a tall and a square one, at a learning rate that changes per step as
a schedule would change it. Writes one safetensors file:
  param.I.initial, grad.I.step.K (K = 0..steps-1), lr (one rate per step), and for each case C the results
  C.param.I.torch, C.buf.I.torch   torch.optim.Muon (its Newton-Schulz products in bfloat16)
  C.param.I.fp64, C.buf.I.fp64     the same algorithm in float64 throughout, the judge of spread's float32 mode
Usage: muon_ref.py OUT.safetensors CASE...   CASE = MOMENTUM,NESTEROV(0|1),NS_STEPS,WEIGHT_DECAY,ADJUST
(ADJUST: original | match_rms_adamw); C counts the cases from 0."""
import math
import sys

import torch
from safetensors.torch import save_file

SHAPES = [(16, 40), (24, 16), (32, 32)]
STEPS = 3
A, B, C = 3.4445, -4.7750, 2.0315


def newton_schulz_fp64(u, ns_steps, eps=1e-7):
    x = u.double()
    tall = x.size(0) > x.size(1)
    if tall:
        x = x.T
    x = x / x.norm().clamp(min=eps)
    for _ in range(ns_steps):
        gram = x @ x.T
        x = A * x + (B * gram + C * gram @ gram) @ x
    return x.T if tall else x


def adjusted(lr, adjust, shape):
    rows, cols = shape
    if adjust == "match_rms_adamw":
        return lr * 0.2 * math.sqrt(max(rows, cols))
    return lr * math.sqrt(max(1.0, rows / cols))


def fp64_muon(params, grads, lrs, momentum, nesterov, ns_steps, wd, adjust):
    params = [p.double().clone() for p in params]
    bufs = [torch.zeros_like(p) for p in params]
    for k, lr in enumerate(lrs):
        for i, p in enumerate(params):
            g = grads[i][k].double()
            bufs[i] = bufs[i] + (1 - momentum) * (g - bufs[i])
            u = g + momentum * (bufs[i] - g) if nesterov else bufs[i]
            o = newton_schulz_fp64(u, ns_steps)
            params[i] = p * (1 - lr * wd) - adjusted(lr, adjust, p.shape) * o
            p = params[i]
    return params, bufs


def run_case(c, initial, grads, lrs):
    momentum, nesterov, ns_steps, wd, adjust = c.split(",")
    momentum, nesterov, ns_steps, wd = float(momentum), nesterov == "1", int(ns_steps), float(wd)
    params = [torch.nn.Parameter(p.clone()) for p in initial]
    opt = torch.optim.Muon(params, lr=lrs[0], weight_decay=wd, momentum=momentum, nesterov=nesterov,
                           ns_steps=ns_steps, adjust_lr_fn=adjust)
    for k, lr in enumerate(lrs):
        for group in opt.param_groups:
            group["lr"] = lr
        for i, p in enumerate(params):
            p.grad = grads[i][k].clone()
        opt.step()
    fp64_params, fp64_bufs = fp64_muon(initial, grads, lrs, momentum, nesterov, ns_steps, wd, adjust)
    return params, opt, fp64_params, fp64_bufs


def main(out, *cases):
    gen = torch.Generator().manual_seed(1234)
    initial = [torch.randn(s, generator=gen) * 0.1 for s in SHAPES]
    grads = [[torch.randn(s, generator=gen) * (0.01 * (k + 1)) for k in range(STEPS)] for s in SHAPES]
    lrs = [0.02, 0.015, 0.005]
    tensors = {"lr": torch.tensor(lrs, dtype=torch.float64)}
    for i in range(len(SHAPES)):
        tensors[f"param.{i}.initial"] = initial[i]
        for k in range(STEPS):
            tensors[f"grad.{i}.step.{k}"] = grads[i][k]
    for c, case in enumerate(cases):
        params, opt, fp64_params, fp64_bufs = run_case(case, initial, grads, lrs)
        for i, p in enumerate(params):
            tensors[f"{c}.param.{i}.torch"] = p.detach().clone()
            tensors[f"{c}.buf.{i}.torch"] = opt.state[p]["momentum_buffer"].clone()
            tensors[f"{c}.param.{i}.fp64"] = fp64_params[i].float()
            tensors[f"{c}.buf.{i}.fp64"] = fp64_bufs[i].float()
    save_file({k: v.contiguous() for k, v in tensors.items()}, out)


if __name__ == "__main__":
    main(*sys.argv[1:])
