#!/usr/bin/env python3
"""The reference for bench/bench_contrastive.sh: spread's encoder and contrastive loss in plain PyTorch, as
sentence-transformers trains a bi-encoder with MultipleNegativesRankingLoss (PyTorch eager on a CPU).

Model: spread's transformer (src/model/transformer.cpp) without its LM head: learned token and position embeddings,
pre-norm blocks with bidirectional multi-head attention masked on padded keys, a GELU MLP 4x, a final LayerNorm;
biases; dropout after the embeddings, on the attention probabilities and after both residual projections; init
N(0, 0.02), residual projections N(0, 0.02 / sqrt(2 n_layer)), biases 0. (spread ties its LM head to the token
embedding, so the encoder has the same parameters with or without it.)
Embedding: mean of the final normed hidden states over the valid tokens (ST's Pooling "mean").
Loss (MNRL): s_ij = 20 cos(a_i, p_j), L = CE(s, arange(B)). AdamW (betas 0.9 / 0.95, weight decay 0.1 on the
weights of dimension >= 2, none on biases and LayerNorms), gradients clipped at norm 1.0.
--cached M: GradCache (Gao et al. 2021), as spread's loss.contrastive.mini_batch: embed chunks of M texts
(anchors, then positives) without a graph, saving the CPU RNG state before each; the loss on the detached
embeddings and its gradient per embedding; then per chunk restore the RNG state (the same dropout masks), embed
again with a graph and backpropagate <embedding, cached gradient>.

Inputs are random token ids, no tokenizer: a text's length (tokens, [CLS] and [SEP] included) is drawn uniformly
from [--min-len, --max-len], or taken from --lengths FILE (one "anchor positive" pair of lengths a line, e.g. the
lengths spread's tokenizer gives the benchmark's pairs file; train draws seeded pairs of lines, encode uses the
numbers in file order). Anchors and positives are right-padded separately, each to its batch's longest text
(cached: to its chunk's longest). Encoding sorts texts longest first, as ST's encode() and spread's do.
Needs Debian's python3-torch (PyTorch 1.13). Prints one JSON line:
  --mode train   {"pairs_per_s": median over windows of --window steps after the first, "parameters": N, ...}
  --mode encode  {"texts_per_s": texts / seconds over all batches, eval mode, no_grad, ...}
N counts the parameters without the position embedding, as spread's "model: ... M parameters" line and run.json.
    /usr/bin/python3 bench/st_ref.py --mode train --n-layer 4 --n-head 4 --n-embd 256 --block 64 --vocab 4100 \\
        --batch 64 --steps 40 --min-len 8 --max-len 64
"""
import argparse
import json
import math
import os
import resource
import statistics
import time

import numpy as np
import torch
import torch.nn as nn
from torch.nn import functional as F

from nanogpt_ref import openblas_info  # bench/ is this script's own folder, hence on sys.path


class SelfAttention(nn.Module):
    def __init__(self, c, h, dropout):
        super().__init__()
        self.c_attn = nn.Linear(c, 3 * c)
        self.c_proj = nn.Linear(c, c)
        self.attn_dropout, self.resid_dropout = nn.Dropout(dropout), nn.Dropout(dropout)
        self.n_head, self.n_embd = h, c

    def forward(self, x, mask):
        """x: [B, T, C]; mask: additive [B, 1, 1, T], 0 for valid keys and -inf for padding (queries at padded
        positions still attend to the valid keys: their outputs are never pooled)."""
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1))) + mask
        y = self.attn_dropout(F.softmax(att, dim=-1)) @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class Block(nn.Module):
    def __init__(self, c, h, dropout):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(c), nn.LayerNorm(c)
        self.attn = SelfAttention(c, h, dropout)
        self.c_fc, self.c_proj = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)
        self.gelu, self.dropout = nn.GELU(), nn.Dropout(dropout)

    def forward(self, x, mask):
        x = x + self.attn(self.ln_1(x), mask)
        return x + self.dropout(self.c_proj(self.gelu(self.c_fc(self.ln_2(x)))))


class Encoder(nn.Module):
    def __init__(self, vocab, layers, c, h, block, dropout):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, c), nn.Embedding(block, c)
        self.drop = nn.Dropout(dropout)
        self.h = nn.ModuleList([Block(c, h, dropout) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(c)
        residual_std = 0.02 / math.sqrt(2 * layers)  # GPT-2: the residual stream grows with depth
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, 0.0, residual_std if name.endswith("c_proj.weight") else 0.02)
            elif not name.startswith("ln") and ".ln_" not in name:
                nn.init.zeros_(p)  # Linear biases; LayerNorms keep weight 1, bias 0

    def forward(self, idx, valid):
        """idx: [B, T] token ids; valid: [B, T] bool. Returns the final normed hidden states [B, T, C]."""
        T = idx.size(1)
        mask = torch.zeros(valid.shape, dtype=torch.float32).masked_fill(~valid, float("-inf"))[:, None, None, :]
        x = self.drop(self.wte(idx) + self.wpe.weight[:T])
        for block in self.h:
            x = block(x, mask)
        return self.ln_f(x)


def mean_pool(hidden, valid):
    """sentence-transformers' Pooling (mean): sum of the valid tokens' states over their count."""
    m = valid.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)


def embed(model, batch):
    idx, valid = batch
    return mean_pool(model(idx, valid), valid)


def mnrl(anchors, positives, scale=20.0):
    """MultipleNegativesRankingLoss: CE over 20 cos(a_i, p_j), the positive of a_i at column i."""
    scores = scale * F.normalize(anchors, dim=-1) @ F.normalize(positives, dim=-1).t()
    return F.cross_entropy(scores, torch.arange(scores.size(0)))


def pad(lengths, vocab, rng):
    """Random ids for texts of these lengths, right-padded to the longest (id 0 at padding): (ids, valid)."""
    lengths = np.asarray(lengths)
    T = int(lengths.max())
    valid = np.arange(T)[None, :] < lengths[:, None]
    ids = np.where(valid, rng.integers(0, vocab, size=valid.shape), 0)
    return torch.from_numpy(ids), torch.from_numpy(valid)


def cached_step(model, a_lengths, p_lengths, chunk, vocab, rng):
    """GradCache: the gradient of mnrl over the whole batch at the memory of one chunk's graph."""
    lengths = list(a_lengths) + list(p_lengths)
    chunks = [pad(lengths[i:i + chunk], vocab, rng) for i in range(0, len(lengths), chunk)]
    states, embeddings = [], []
    with torch.no_grad():
        for batch in chunks:
            states.append(torch.get_rng_state())
            embeddings.append(embed(model, batch))
    e = torch.cat(embeddings).requires_grad_(True)
    n = len(a_lengths)
    loss = mnrl(e[:n], e[n:])
    loss.backward()
    grads = e.grad.split([len(b[0]) for b in chunks])
    for batch, state, grad in zip(chunks, states, grads):
        torch.set_rng_state(state)  # the dropout masks of the first pass
        embed(model, batch).backward(grad)
    return loss


def load_lengths(path, block):
    pairs = np.loadtxt(path, dtype=np.int64, ndmin=2)
    if pairs.shape[1] != 2 or pairs.min() < 1 or pairs.max() > block:
        raise SystemExit(f"{path}: expected lines of two lengths in [1, {block}] (anchor, positive)")
    return pairs


def train(a, model, lengths, rng):
    params = [q for q in model.parameters() if q.requires_grad]
    groups = [{"params": [q for q in params if q.dim() >= 2], "weight_decay": 0.1},
              {"params": [q for q in params if q.dim() < 2], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=1e-4, betas=(0.9, 0.95))

    def draw():
        if lengths is not None:
            rows = lengths[rng.integers(0, len(lengths), size=a.batch)]
            return rows[:, 0], rows[:, 1]
        return tuple(rng.integers(a.min_len, a.max_len + 1, size=a.batch) for _ in range(2))

    model.train()
    pairs_per_s, losses, window_start = [], [], time.perf_counter()
    for step in range(1, a.steps + 1):
        a_len, p_len = draw()
        if a.cached:
            loss = cached_step(model, a_len, p_len, a.cached, a.vocab, rng)
        else:
            loss = mnrl(embed(model, pad(a_len, a.vocab, rng)), embed(model, pad(p_len, a.vocab, rng)))
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        if step % a.window == 0:
            now = time.perf_counter()
            if step > a.window:
                pairs_per_s.append(a.window * a.batch / (now - window_start))
            window_start = now
    return {"pairs_per_s": round(statistics.median(pairs_per_s), 1), "first_loss": round(losses[0], 4),
            "last_loss": round(losses[-1], 4)}


def encode(a, model, lengths, rng):
    if lengths is not None:
        flat = lengths.reshape(-1)
        text_lengths = np.resize(flat, a.texts)  # file order, repeated when the file has fewer texts
    else:
        text_lengths = rng.integers(a.min_len, a.max_len + 1, size=a.texts)
    order = np.argsort(-text_lengths, kind="stable")  # longest first: similar lengths share a batch
    batches = [pad(text_lengths[order[i:i + a.batch]], a.vocab, rng) for i in range(0, a.texts, a.batch)]
    model.eval()
    out = torch.empty(a.texts, a.n_embd)
    start = time.perf_counter()
    with torch.no_grad():
        for i, batch in enumerate(batches):
            rows = torch.from_numpy(order[i * a.batch:(i + 1) * a.batch])
            out.index_copy_(0, rows, F.normalize(embed(model, batch), dim=-1))
    return {"texts_per_s": round(a.texts / (time.perf_counter() - start), 1)}


def check(a):
    """The reference model with a spread run's newest weights: its eval-mode mean-pooled embeddings of the texts in
    --check-texts (tokenised with the run's sentencepiece model, "[CLS] text [SEP]" as spread does, one padded batch)
    against `spread encode --no-normalize` of the same texts in --check-npy."""
    import glob
    import io
    import re
    import sentencepiece  # Debian's python3-sentencepiece
    ckpt = sorted(glob.glob(os.path.join(a.check_run, "ckpt", "*.ckpt")))[-1]
    with open(ckpt, "rb") as f:
        data = f.read()
    version = int.from_bytes(data[8:12], "little")  # the header: magic, version, size, CRC-32; the payload at [24:]
    if version >= 2:  # a safetensors file
        import safetensors.torch
        tensors = safetensors.torch.load(data[24:]).items()
    else:  # a LibTorch archive
        tensors = torch.jit.load(io.BytesIO(data[24:])).named_parameters()
    names = [("blocks.", "h."), (".ln1.", ".ln_1."), (".ln2.", ".ln_2."), (".attn.qkv.", ".attn.c_attn."),
             (".attn.proj.", ".attn.c_proj."), (".mlp.fc.", ".c_fc."), (".mlp.proj.", ".c_proj.")]
    weights = {}
    for name, t in tensors:
        if name.startswith("model."):
            name = name[len("model."):]
            for spread_name, ours in names:
                name = name.replace(spread_name, ours)
            weights[name] = t.detach()
    layers = 1 + max(int(re.match(r"h\.(\d+)\.", k).group(1)) for k in weights if k.startswith("h."))
    model = Encoder(*weights["wte.weight"].shape[:1], layers, weights["wte.weight"].shape[1], a.n_head,
                    weights["wpe.weight"].shape[0], 0.0)
    model.load_state_dict(weights, strict=True)
    model.eval()
    with open(os.path.join(a.check_run, "tokenizer.json")) as f:
        special = json.load(f)["special_tokens"]
    sp = sentencepiece.SentencePieceProcessor(model_file=os.path.join(a.check_run, "tokenizer.model"))
    with open(a.check_texts, encoding="utf-8") as f:
        texts = f.read().splitlines()
    seqs = [[special["[CLS]"]] + sp.encode(t)[:a.max_len - 2] + [special["[SEP]"]] for t in texts]
    ids = torch.full((len(seqs), max(map(len, seqs))), special["[PAD]"])
    valid = torch.zeros(ids.shape, dtype=torch.bool)
    for i, s in enumerate(seqs):
        ids[i, :len(s)], valid[i, :len(s)] = torch.tensor(s), True
    with torch.no_grad():
        ours = embed(model, (ids, valid)).numpy()
    theirs = np.load(a.check_npy)
    return {"texts": len(texts), "max_abs_diff": float(np.abs(ours - theirs).max()),
            "max_abs": float(np.abs(theirs).max())}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mode", choices=["train", "encode", "check"], default="train")
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--n-embd", type=int, default=256)
    p.add_argument("--block", type=int, default=64, help="positions (spread's model.block_size)")
    p.add_argument("--vocab", type=int, default=4100, help="spread's: tokenizer.vocab_size + its reserved ids")
    p.add_argument("--batch", type=int, default=64, help="train: pairs per step; encode: texts per forward pass")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--window", type=int, default=5, help="steps per timing window (the first is warm-up)")
    p.add_argument("--texts", type=int, default=20000, help="encode: texts to embed")
    p.add_argument("--min-len", type=int, default=8)
    p.add_argument("--max-len", type=int, default=64)
    p.add_argument("--lengths", help="file of 'anchor positive' token lengths, one pair a line")
    p.add_argument("--cached", type=int, default=0, metavar="M", help="GradCache with chunks of M texts (0 = off)")
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)), help="torch.set_num_threads")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--check-run", help="check: a spread run directory (contrastive or mlm)")
    p.add_argument("--check-texts", help="check: a file of texts, one a line")
    p.add_argument("--check-npy", help="check: `spread encode --no-normalize` of --check-texts")
    a = p.parse_args()
    if not 1 <= a.min_len <= a.max_len <= a.block:
        p.error("need 1 <= --min-len <= --max-len <= --block")
    if a.n_embd % a.n_head:
        p.error("--n-embd must be a multiple of --n-head")
    if a.mode == "train" and a.steps < 2 * a.window:
        p.error("--steps must be at least 2 * --window (the first window is warm-up)")

    torch.set_num_threads(a.threads)
    if a.mode == "check":
        print(json.dumps(check(a)))
        return
    torch.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)  # data; torch's generator is left to dropout (and GradCache's replay)
    lengths = load_lengths(a.lengths, a.block) if a.lengths else None
    model = Encoder(a.vocab, a.n_layer, a.n_embd, a.n_head, a.block, a.dropout)
    result = train(a, model, lengths, rng) if a.mode == "train" else encode(a, model, lengths, rng)
    n = sum(q.numel() for q in model.parameters()) - model.wpe.weight.numel()
    peak_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    print(json.dumps({**result, "parameters": n, "peak_rss_mib": round(peak_rss_mib), "torch": torch.__version__,
                      "threads": torch.get_num_threads(), **openblas_info()}))


if __name__ == "__main__":
    main()
