#!/usr/bin/env python3
"""The peer side of bench/bench_encode_model.sh: sentence-transformers' own encode of a model folder on CPU.

    bench_encode_model_peer.py encode MODEL_DIR TEXTS_FILE OUT.npy --batch-size B --threads T
    bench_encode_model_peer.py compare A.npy B.npy
    bench_encode_model_peer.py texts STSB_DIR N OUT.txt

encode: torch.set_num_threads(T) before anything runs, SentenceTransformer(MODEL_DIR, device="cpu") in float32,
one warm-up encode of the first B texts (not timed), then SentenceTransformer.encode(texts, batch_size=B,
convert_to_numpy=True), timed around that call only; the embeddings go to OUT.npy (float32, one row per text).
Prints one JSON line: import_s (import torch + sentence_transformers), load_s (the SentenceTransformer(...) call),
warmup_s, encode_s (the timed call), load_encode_s = load_s + encode_s, texts, dim, encode_texts_per_s (texts /
encode_s), threads, batch_size, max_seq_length, torch, sentence_transformers. Writing the .npy is not timed.
compare: one JSON line {"rows", "dim", "max_abs_diff"} (exit 2 when the shapes differ).
texts: the first N sentences of the STS benchmark's CSVs (train, then dev; sentence1, sentence2 of each row in
order), one per line (inner line breaks become spaces); prints how many it wrote.
TEXTS_FILE: UTF-8, split on "\\n" (a final empty piece is no line), as spread's `encode --in FILE.txt`.
"""
import argparse
import csv
import json
import os
import sys
import time


def read_lines(path):
    with open(path, "rb") as f:
        lines = f.read().decode("utf-8").split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def encode(a):
    t0 = time.perf_counter()
    import numpy as np
    import torch
    torch.set_num_threads(a.threads)
    import sentence_transformers
    from sentence_transformers import SentenceTransformer
    t1 = time.perf_counter()
    # float32 whatever dtype the folder was saved in (5.3 loads "auto": the saved dtype), as spread computes.
    model = SentenceTransformer(a.model_dir, device="cpu", model_kwargs={"dtype": torch.float32})
    t2 = time.perf_counter()
    texts = read_lines(a.texts_file)
    model.encode(texts[:a.batch_size], batch_size=a.batch_size, convert_to_numpy=True, show_progress_bar=False)
    t3 = time.perf_counter()
    emb = model.encode(texts, batch_size=a.batch_size, convert_to_numpy=True, show_progress_bar=False)
    t4 = time.perf_counter()
    np.save(a.out_npy, np.ascontiguousarray(emb, dtype=np.float32))
    load_s, encode_s = t2 - t1, t4 - t3
    print(json.dumps({
        "import_s": round(t1 - t0, 4), "load_s": round(load_s, 4), "warmup_s": round(t3 - t2, 4),
        "encode_s": round(encode_s, 4), "load_encode_s": round(load_s + encode_s, 4), "texts": len(texts),
        "dim": int(emb.shape[1]), "encode_texts_per_s": round(len(texts) / encode_s, 2),
        "threads": torch.get_num_threads(), "batch_size": a.batch_size, "max_seq_length": model.max_seq_length,
        "torch": torch.__version__, "sentence_transformers": sentence_transformers.__version__}))


def compare(a):
    import numpy as np
    x, y = np.load(a.a_npy), np.load(a.b_npy)
    if x.shape != y.shape:
        print(json.dumps({"shape_a": list(x.shape), "shape_b": list(y.shape)}))
        sys.exit(2)
    diff = float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64)))) if x.size else 0.0
    print(json.dumps({"rows": int(x.shape[0]), "dim": int(x.shape[1]), "max_abs_diff": diff}))


def texts(a):
    out = []
    for name in ("stsb-en-train.csv", "stsb-en-dev.csv"):
        path = os.path.join(a.stsb_dir, name)
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8", newline="") as f:
            for row in csv.reader(f):
                for s in row[:2]:
                    s = " ".join(s.split())
                    if s and len(out) < a.n:
                        out.append(s)
    with open(a.out_txt, "w", encoding="utf-8") as f:
        f.write("".join(s + "\n" for s in out))
    print(len(out))


def main():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    p = argparse.ArgumentParser(prog="bench_encode_model_peer.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("encode")
    for name in ("model_dir", "texts_file", "out_npy"):
        e.add_argument(name)
    e.add_argument("--batch-size", type=int, default=32)
    e.add_argument("--threads", type=int, default=2)
    e.set_defaults(run=encode)
    c = sub.add_parser("compare")
    for name in ("a_npy", "b_npy"):
        c.add_argument(name)
    c.set_defaults(run=compare)
    t = sub.add_parser("texts")
    t.add_argument("stsb_dir")
    t.add_argument("n", type=int)
    t.add_argument("out_txt")
    t.set_defaults(run=texts)
    a = p.parse_args()
    a.run(a)


if __name__ == "__main__":
    main()
