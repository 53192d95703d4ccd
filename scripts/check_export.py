#!/usr/bin/env python3
"""Independent check of `spread export`: reads the exported folder with its own safetensors reader, runs the
model with forward passes written from Hugging Face transformers' modeling_gpt2.py (GPT2LMHeadModel) and
modeling_megatron_bert.py (MegatronBertModel, then sentence-transformers' Pooling, or PyLate's Dense and
normalisation for a ColBERT folder), and compares the result with spread's own output on the same token ids.

  check_export.py --export DIR --ids IDS.npy --expect OUT.npy [--attend ATTEND.npy] [--maxsim SCORE.npy]
                  [--tol 1e-5]

IDS.npy: [B, T] token ids (float64 is fine), -1 = padding (encoders only). OUT.npy: spread's logits [B*T, V]
(GPT-2 layout), pooled embeddings [B, C] (MegatronBert layout) or, for a PyLate (ColBERT) folder, the token vectors
[N, head_dim] of the N positions whose id is not -1, in row-major order. ColBERT only: ATTEND.npy [B, T], 1 where
the position is attended to (default: where the id is not -1; a query's expansion [MASK] tokens have an id but are
not attended to); SCORE.npy, spread's MaxSim score of row 0 as a query against row 1 as a document, recomputed as
PyLate scores (query: every position with an id under query expansion, the attended ones otherwise; document: the
attended positions whose id is not one of skiplist_words; sum over query tokens of the best dot product). Exit 0
when the largest absolute difference is at most --tol, 1 otherwise. Needs only Debian's python3-torch and
python3-numpy (no transformers package).
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
          "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}


def read_safetensors(path):
    """The format's specification: u64 LE header length, JSON header, then the tensors' row-major LE bytes."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n].decode("utf-8"))
    base = 8 + n
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        array = np.frombuffer(data[base + begin:base + end], dtype=np.dtype(DTYPES[entry["dtype"]]).newbyteorder("<"))
        out[name] = torch.from_numpy(array.reshape(entry["shape"]).copy())
    return out


def linear(x, w, b):  # nn.Linear: weight [out, in]
    return x @ w.t() + b


def conv1d(x, w, b):  # GPT-2's Conv1D: weight [in, out]
    return x @ w + b


def heads(x, n_head):  # [B, T, C] -> [B, H, T, D]
    b, t, c = x.shape
    return x.view(b, t, n_head, c // n_head).permute(0, 2, 1, 3)


def merge(x):  # [B, H, T, D] -> [B, T, C]
    b, h, t, d = x.shape
    return x.permute(0, 2, 1, 3).contiguous().view(b, t, h * d)


def gpt2_logits(w, cfg, ids):
    """GPT2LMHeadModel.forward without cache, dropout or masks beyond the causal one."""
    p = "transformer." if "transformer.wte.weight" in w else ""
    eps, c, n_head = cfg["layer_norm_epsilon"], cfg["n_embd"], cfg["n_head"]
    assert cfg["activation_function"] == "gelu", "this check runs the exact GELU spread trains with"
    t = ids.shape[1]
    x = w[p + "wte.weight"][ids] + w[p + "wpe.weight"][:t]
    causal = torch.tril(torch.ones(t, t, dtype=torch.bool)).view(1, 1, t, t)
    for i in range(cfg["n_layer"]):
        h = f"{p}h.{i}."
        a = F.layer_norm(x, (c,), w[h + "ln_1.weight"], w[h + "ln_1.bias"], eps)
        q, k, v = conv1d(a, w[h + "attn.c_attn.weight"], w[h + "attn.c_attn.bias"]).split(c, dim=2)
        q, k, v = heads(q, n_head), heads(k, n_head), heads(v, n_head)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(v.size(-1))
        att = torch.where(causal, att, torch.tensor(torch.finfo(att.dtype).min, dtype=att.dtype))
        y = merge(F.softmax(att, dim=-1) @ v)
        x = x + conv1d(y, w[h + "attn.c_proj.weight"], w[h + "attn.c_proj.bias"])
        m = F.layer_norm(x, (c,), w[h + "ln_2.weight"], w[h + "ln_2.bias"], eps)
        m = F.gelu(conv1d(m, w[h + "mlp.c_fc.weight"], w[h + "mlp.c_fc.bias"]))
        x = x + conv1d(m, w[h + "mlp.c_proj.weight"], w[h + "mlp.c_proj.bias"])
    x = F.layer_norm(x, (c,), w[p + "ln_f.weight"], w[p + "ln_f.bias"], eps)
    head = w.get("lm_head.weight", w[p + "wte.weight"])  # tie_word_embeddings
    return x @ head.t()


def megatron_bert_hidden(w, cfg, ids, mask):
    """MegatronBertModel.forward: embeddings without LayerNorm, pre-LN layers, final encoder.ln."""
    eps, c, n_head = cfg["layer_norm_eps"], cfg["hidden_size"], cfg["num_attention_heads"]
    assert cfg["hidden_act"] == "gelu"
    t = ids.shape[1]
    x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.token_type_embeddings.weight"][0]
         + w["embeddings.position_embeddings.weight"][:t])
    # get_extended_attention_mask: (1 - mask) * dtype minimum, broadcast over heads and queries.
    extended = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
    for i in range(cfg["num_hidden_layers"]):
        h = f"encoder.layer.{i}."
        a = F.layer_norm(x, (c,), w[h + "attention.ln.weight"], w[h + "attention.ln.bias"], eps)
        q, k, v = (heads(linear(a, w[h + f"attention.self.{n}.weight"], w[h + f"attention.self.{n}.bias"]), n_head)
                   for n in ("query", "key", "value"))
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(c // n_head) + extended
        ctx = merge(F.softmax(scores, dim=-1) @ v)
        x = x + linear(ctx, w[h + "attention.output.dense.weight"], w[h + "attention.output.dense.bias"])
        m = F.layer_norm(x, (c,), w[h + "ln.weight"], w[h + "ln.bias"], eps)
        m = F.gelu(linear(m, w[h + "intermediate.dense.weight"], w[h + "intermediate.dense.bias"]))
        x = x + linear(m, w[h + "output.dense.weight"], w[h + "output.dense.bias"])
    return F.layer_norm(x, (c,), w["encoder.ln.weight"], w["encoder.ln.bias"], eps)


def pool(pooling, hidden, mask):
    """sentence-transformers' Pooling for the modes spread exports."""
    m = mask.unsqueeze(-1).float()
    if pooling["pooling_mode_mean_tokens"]:
        return (hidden * m).sum(1) / torch.clamp(m.sum(1), min=1e-9)
    if pooling["pooling_mode_cls_token"]:
        return hidden[:, 0]
    if pooling["pooling_mode_lasttoken"]:
        last = mask.long().sum(1) - 1
        return hidden[torch.arange(hidden.size(0)), last.clamp(min=0)]
    raise SystemExit("unsupported pooling mode in 1_Pooling/config.json")


def colbert_vectors(export, w, cfg, ids, attend):
    """PyLate's ColBERT: MegatronBertModel's last hidden state -> Dense (1_Dense, identity activation) -> L2."""
    with open(os.path.join(export, "1_Dense", "config.json")) as f:
        dense = json.load(f)
    assert dense["activation_function"] == "torch.nn.modules.linear.Identity"
    d = read_safetensors(os.path.join(export, "1_Dense", "model.safetensors"))
    hidden = megatron_bert_hidden(w, cfg, ids, attend)
    v = hidden @ d["linear.weight"].t()
    if dense["bias"]:
        v = v + d["linear.bias"]
    assert v.shape[-1] == dense["out_features"] and hidden.shape[-1] == dense["in_features"]
    return F.normalize(v, p=2, dim=-1)


def token_id(tokenizer, token):
    """convert_tokens_to_ids on tokenizer.json: an added token or a vocabulary entry."""
    for added in tokenizer["added_tokens"]:
        if added["content"] == token:
            return added["id"]
    if token not in tokenizer["model"]["vocab"]:
        raise SystemExit(f"{token!r} (config_sentence_transformers.json) is no token of tokenizer.json")
    return tokenizer["model"]["vocab"][token]


def pylate_maxsim(export, vectors, raw, attend):
    """Row 0 as a query, row 1 as a document, masked as PyLate's ColBERT.encode masks them; colbert_scores."""
    with open(os.path.join(export, "config_sentence_transformers.json")) as f:
        st = json.load(f)
    with open(os.path.join(export, "tokenizer.json")) as f:
        tokenizer = json.load(f)
    # ColBERT.preprocess puts the prefix's id after the first token, which the post processor makes [CLS].
    cls = tokenizer["post_processor"]["special_tokens"]["[CLS]"]["ids"][0]
    for row, prefix in ((0, st["query_prefix"]), (1, st["document_prefix"])):
        want = [cls, token_id(tokenizer, prefix)]
        if [int(x) for x in raw[row, :2]] != want:
            print(f"row {row} starts {raw[row, :2]}, PyLate would read {want} ([CLS] then {prefix!r})")
            return None
    ids = torch.from_numpy(raw.astype(np.int64))
    query_mask = (ids[0] >= 0) if st["do_query_expansion"] else attend[0]
    skip = torch.tensor([token_id(tokenizer, word) for word in st["skiplist_words"]], dtype=torch.long)
    document_mask = attend[1] & ~torch.isin(ids[1], skip)
    q, d = vectors[0][query_mask], vectors[1][document_mask]
    return (q @ d.t()).max(dim=1).values.sum()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--export", required=True)
    ap.add_argument("--ids", required=True)
    ap.add_argument("--expect", required=True)
    ap.add_argument("--attend")
    ap.add_argument("--maxsim")
    ap.add_argument("--tol", type=float, default=1e-5)
    args = ap.parse_args()
    with open(os.path.join(args.export, "config.json")) as f:
        cfg = json.load(f)
    st_path = os.path.join(args.export, "config_sentence_transformers.json")
    colbert = False
    if os.path.exists(st_path):
        with open(st_path) as f:
            colbert = json.load(f).get("model_type") == "ColBERT"
    w = read_safetensors(os.path.join(args.export, "model.safetensors"))
    raw = np.load(args.ids)
    ids = torch.from_numpy(np.where(raw < 0, 0, raw).astype(np.int64))
    mask = torch.from_numpy(raw >= 0)
    attend = torch.from_numpy(np.load(args.attend) > 0) if args.attend else mask
    score_diff = 0.0
    with torch.no_grad():
        if cfg["model_type"] == "gpt2":
            got = gpt2_logits(w, cfg, ids).reshape(-1, cfg["vocab_size"])
        elif cfg["model_type"] == "megatron-bert" and colbert:
            vectors = colbert_vectors(args.export, w, cfg, ids, attend)
            got = vectors[mask]
            if args.maxsim:
                score = pylate_maxsim(args.export, vectors, raw, attend)
                if score is None:
                    return 1
                want_score = float(np.load(args.maxsim).reshape(-1)[0])
                score_diff = abs(score.item() - want_score)
                print(f"MaxSim: PyLate's {score.item():.6f}, spread's {want_score:.6f}, diff {score_diff:.3g}")
        elif cfg["model_type"] == "megatron-bert":
            with open(os.path.join(args.export, "1_Pooling", "config.json")) as f:
                pooling = json.load(f)
            got = pool(pooling, megatron_bert_hidden(w, cfg, ids, mask), mask)
        else:
            raise SystemExit(f"unknown model_type {cfg['model_type']}")
    want = torch.from_numpy(np.load(args.expect).astype(np.float32))
    if tuple(got.shape) != tuple(want.shape):
        print(f"shape mismatch: reference {tuple(got.shape)}, spread {tuple(want.shape)}")
        return 1
    diff = (got - want).abs().max().item()
    name = "ColBERT token vectors" if colbert else cfg["model_type"]
    print(f"{name}: max abs diff {diff:.3g} over {tuple(got.shape)} (tolerance {args.tol:g})")
    return 0 if diff <= args.tol and score_diff <= args.tol else 1


if __name__ == "__main__":
    sys.exit(main())
