#!/usr/bin/env python3
"""The reference for bench/bench_lm.sh: nanoGPT's model and training step (PyTorch eager, as Karpathy's
model.py and train.py run on a CPU: manual causal attention, AdamW with decay/no-decay groups, clipping at 1.0,
dropout 0), timed on the same shapes, data and BLAS as spread, so the speed ratio comes from one run.
Runs on Debian's python3-torch (PyTorch 1.13, the version the reference nanoGPT numbers were measured with) and on
today's PyTorch (the pinned torch of scripts/python_env.sh), where it also takes
  --dtype bfloat16   the forward pass and loss under torch.autocast("cpu", dtype=torch.bfloat16), the CPU form of
                     nanoGPT's mixed precision (its train.py autocasts on GPUs only), master weights float32
  --compile          torch.compile(model) as nanoGPT's compile = True (inductor; its compile time falls in the
                     warm-up window, and --steps should leave several windows after it)
  --llama            a Llama-style model in plain PyTorch >= 2.0 instead of nanoGPT's (bench/bench_llama.sh),
                     written as transformers' Llama and most reference code write it: separate q/k/v/o and
                     gate/up/down projections without biases, RMSNorm computed in float32 (LlamaRMSNorm, eps 1e-5
                     as spread's default), rotary embeddings on q and k (rotate-half pairs, float32 cos/sin of
                     --rope-theta), grouped-query attention of --kv-heads k/v heads through
                     F.scaled_dot_product_attention(is_causal=True, enable_gqa=True) (k and v repeat_interleaved
                     before torch 2.5), a SwiGLU MLP of width --intermediate (default 4 * n_embd), no position
                     table, the output matrix tied to the embedding (--bias does not apply); nanoGPT's init,
                     optimizer and loop as above
Prints one JSON line: {"tokens_per_s": median over windows of 5 steps after the first 5, "parameters": N} with N
the parameters without the position table (spread's count).
    /usr/bin/python3 bench/nanogpt_ref.py DATA --n-layer 6 --n-head 6 --n-embd 384 --block 256 --batch 8
    bench/nanogpt_ref.py DATA --llama --kv-heads 2 --intermediate 384    (shape A's Llama-style block)
"""
import argparse
import contextlib
import ctypes
import json
import math
import statistics
import time

import numpy as np
import torch
import torch.nn as nn
from torch.nn import functional as F


def layer_norm(c, bias):
    ln = nn.LayerNorm(c)
    if not bias:
        ln.bias = None
    return ln


class CausalSelfAttention(nn.Module):
    def __init__(self, c, h, block, bias):
        super().__init__()
        self.c_attn = nn.Linear(c, 3 * c, bias=bias)
        self.c_proj = nn.Linear(c, c, bias=bias)
        self.attn_dropout, self.resid_dropout = nn.Dropout(0.0), nn.Dropout(0.0)
        self.n_head, self.n_embd = h, c
        self.register_buffer("mask", torch.tril(torch.ones(block, block)).view(1, 1, block, block))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        if hasattr(F, "scaled_dot_product_attention"):  # PyTorch >= 2.0: nanoGPT's "flash" path
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=0.0, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
            y = self.attn_dropout(F.softmax(att, dim=-1)) @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class Block(nn.Module):
    def __init__(self, c, h, block, bias):
        super().__init__()
        self.ln_1, self.ln_2 = layer_norm(c, bias), layer_norm(c, bias)
        self.attn = CausalSelfAttention(c, h, block, bias)
        self.c_fc, self.c_proj = nn.Linear(c, 4 * c, bias=bias), nn.Linear(4 * c, c, bias=bias)
        self.gelu, self.dropout = nn.GELU(), nn.Dropout(0.0)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.dropout(self.c_proj(self.gelu(self.c_fc(self.ln_2(x)))))


class GPT(nn.Module):
    def __init__(self, vocab, layers, c, h, block, bias):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, c), nn.Embedding(block, c)
        self.drop = nn.Dropout(0.0)
        self.h = nn.ModuleList([Block(c, h, block, bias) for _ in range(layers)])
        self.ln_f = layer_norm(c, bias)
        self.lm_head = nn.Linear(c, vocab, bias=False)
        self.wte.weight = self.lm_head.weight  # tied, as nanoGPT
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)

    def forward(self, idx, targets):
        pos = torch.arange(idx.size(1), dtype=torch.long)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)


class RMSNorm(nn.Module):
    """transformers' LlamaRMSNorm: the mean square in float32 whatever the input's dtype, then the weight."""

    def __init__(self, c, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(c))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.to(torch.float32)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


# enable_gqa arrived in PyTorch 2.5; before it, k and v are repeated to every query head of their group.
SDPA_GQA = tuple(int(v) for v in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 5)


class LlamaAttention(nn.Module):
    def __init__(self, c, h, kv_heads):
        super().__init__()
        self.n_head, self.n_kv_head, self.head_size = h, kv_heads, c // h
        self.q_proj = nn.Linear(c, c, bias=False)
        self.k_proj = nn.Linear(c, kv_heads * self.head_size, bias=False)
        self.v_proj = nn.Linear(c, kv_heads * self.head_size, bias=False)
        self.o_proj = nn.Linear(c, c, bias=False)

    def forward(self, x, cos, sin):
        B, T, C = x.size()
        q = self.q_proj(x).view(B, T, self.n_head, self.head_size).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.n_kv_head, self.head_size).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.n_kv_head, self.head_size).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        if SDPA_GQA:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=0.0, is_causal=True, enable_gqa=True)
        else:
            group = self.n_head // self.n_kv_head
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=0.0, is_causal=True)
        return self.o_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class SwiGLU(nn.Module):
    def __init__(self, c, intermediate):
        super().__init__()
        self.gate_proj = nn.Linear(c, intermediate, bias=False)
        self.up_proj = nn.Linear(c, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, c, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaBlock(nn.Module):
    def __init__(self, c, h, kv_heads, intermediate):
        super().__init__()
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(c), RMSNorm(c)
        self.self_attn = LlamaAttention(c, h, kv_heads)
        self.mlp = SwiGLU(c, intermediate)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    def __init__(self, vocab, layers, c, h, block, kv_heads, intermediate, rope_theta):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, c)
        self.layers = nn.ModuleList([LlamaBlock(c, h, kv_heads, intermediate) for _ in range(layers)])
        self.norm = RMSNorm(c)
        self.lm_head = nn.Linear(c, vocab, bias=False)
        self.embed_tokens.weight = self.lm_head.weight  # tied
        # Rotary angles as transformers' LlamaRotaryEmbedding makes them (float32, both halves alike), once.
        head_size = c // h
        inv_freq = 1.0 / (rope_theta ** (torch.arange(0, head_size, 2, dtype=torch.int64).float() / head_size))
        angles = torch.outer(torch.arange(block, dtype=torch.int64).float(), inv_freq)
        both = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", both.cos(), persistent=False)  # [block, head_size]
        self.register_buffer("sin", both.sin(), persistent=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)

    def forward(self, idx, targets):
        T = idx.size(1)
        cos, sin = self.cos[:T], self.sin[:T]
        x = self.embed_tokens(idx)
        for layer in self.layers:
            x = layer(x, cos, sin)
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("data")
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--n-embd", type=int, default=128)
    p.add_argument("--block", type=int, default=64)
    p.add_argument("--batch", type=int, default=12)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--bias", type=int, default=1, help="biases in Linear and LayerNorm (spread's default: 1)")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--warmup-steps", type=int, default=5, help="steps before the first timed window")
    p.add_argument("--llama", action="store_true", help="the Llama-style model (RMSNorm, RoPE, SwiGLU, GQA)")
    p.add_argument("--kv-heads", type=int, default=0, help="--llama: k/v heads (0 = n_head)")
    p.add_argument("--intermediate", type=int, default=0, help="--llama: SwiGLU width (0 = 4 * n_embd)")
    p.add_argument("--rope-theta", type=float, default=10000.0, help="--llama: the rotary base")
    a = p.parse_args()
    if a.steps < a.warmup_steps + 5:
        p.error("--steps must leave at least one window of 5 after the warm-up")
    kv_heads = a.kv_heads or a.n_head
    if a.llama and not hasattr(F, "scaled_dot_product_attention"):
        p.error("--llama needs PyTorch >= 2.0 (F.scaled_dot_product_attention)")
    if a.llama and (a.n_head % kv_heads or (a.n_embd // a.n_head) % 2):
        p.error("--llama needs n_head a multiple of --kv-heads and an even head size")

    text = open(a.data, encoding="utf-8").read()
    chars = sorted(set(text))
    lut = {ch: i for i, ch in enumerate(chars)}
    data = np.array([lut[ch] for ch in text[: int(0.9 * len(text))]], dtype=np.uint16)

    torch.manual_seed(1337)
    if a.llama:
        model = Llama(len(chars), a.n_layer, a.n_embd, a.n_head, a.block, kv_heads, a.intermediate or 4 * a.n_embd,
                      a.rope_theta)
    else:
        model = GPT(len(chars), a.n_layer, a.n_embd, a.n_head, a.block, bool(a.bias))
    params = [q for q in model.parameters() if q.requires_grad]
    groups = [{"params": [q for q in params if q.dim() >= 2], "weight_decay": 0.1},
              {"params": [q for q in params if q.dim() < 2], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.99))
    forward = torch.compile(model) if a.compile else model
    ctx = (torch.autocast("cpu", dtype=torch.bfloat16) if a.dtype == "bfloat16" else contextlib.nullcontext())

    def get_batch():
        ix = torch.randint(len(data) - a.block, (a.batch,))
        x = torch.stack([torch.from_numpy(data[i:i + a.block].astype(np.int64)) for i in ix])
        y = torch.stack([torch.from_numpy(data[i + 1:i + 1 + a.block].astype(np.int64)) for i in ix])
        return x, y

    model.train()
    x, y = get_batch()
    tokens_per_s, window_start = [], time.perf_counter()
    for step in range(1, a.steps + 1):
        with ctx:
            loss = forward(x, y)
        x, y = get_batch()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        loss.item()
        if step >= a.warmup_steps and (step - a.warmup_steps) % 5 == 0:
            now = time.perf_counter()
            if step > a.warmup_steps:
                tokens_per_s.append(5 * a.batch * a.block / (now - window_start))
            window_start = now
    n = sum(q.numel() for q in model.parameters()) - (0 if a.llama else model.wpe.weight.numel())
    print(json.dumps({"tokens_per_s": round(statistics.median(tokens_per_s), 1), "parameters": n,
                      "torch": torch.__version__, "threads": torch.get_num_threads(), "dtype": a.dtype,
                      "compile": a.compile, **openblas_info()}))


def openblas_info():
    """The BLAS this process loaded (the system's choice among Debian's OpenBLAS builds; the pip wheel's MKL)."""
    if "BLAS_INFO=mkl" in torch.__config__.show():
        return {"blas": "MKL", "blas_threads": torch.get_num_threads()}
    try:
        lib = ctypes.CDLL("libopenblas.so.0")  # the copy torch already loaded (same soname)
        lib.openblas_get_corename.restype = ctypes.c_char_p
        parallel = {0: "sequential", 1: "pthread", 2: "openmp"}.get(lib.openblas_get_parallel(), "?")
        return {"blas": "OpenBLAS", "blas_threading": parallel, "blas_threads": lib.openblas_get_num_threads(),
                "blas_core": lib.openblas_get_corename().decode()}
    except (AttributeError, OSError):
        return {"blas": "unknown"}


if __name__ == "__main__":
    main()
