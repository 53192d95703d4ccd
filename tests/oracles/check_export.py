#!/usr/bin/env python3
"""The real libraries judge `spread export`: they load the exported folder as a user would and their outputs are
compared with spread's own. Runs with the Python of scripts/python_env.sh (transformers, sentence-transformers,
PyLate); there is no re-implementation of any model here.

  check_export.py --export DIR --ids IDS.npy --expect LOGITS.npy                  # a GPT-2 or Llama folder
  check_export.py --export DIR --texts TEXTS --expect EMBEDDINGS.npy              # a sentence-transformers folder
  check_export.py --export DIR --texts QUERIES --documents DOCS --expect VECTORS.npy [--maxsim SCORES.npy]
                                                                                  # a PyLate (ColBERT) folder
  [--tol 1e-5]

GPT-2, Llama: AutoModelForCausalLM.from_pretrained(DIR) on IDS.npy ([B, T] token ids; float64 is fine), against spread's
logits [B*T, V]. sentence-transformers: SentenceTransformer(DIR).encode(texts) without extra normalisation (the
folder's own 2_Normalize, if any, applies), against spread's rows [N, C] (`spread encode --no-normalize`).
PyLate: pylate.models.ColBERT(DIR).encode of each query (is_query=True) and each document (is_query=False), one at a
time; the token vectors encode keeps (documents without skiplist words), all queries' then all documents', against
spread's [N, dim]; with --maxsim, pylate.scores.colbert_scores of every query against every document, against
spread's [queries, documents]. TEXTS, QUERIES, DOCS: UTF-8, one text a line. Prints what it compared and the largest
absolute difference; exit 0 when every difference is at most --tol, 1 otherwise (also when the shapes differ).
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_model_ref  # noqa: E402  (the same loaders the import tests judge with)


def causal_lm_logits(export, ids_path):
    import torch
    model, _ = hf_model_ref.load_hf(export)
    ids = torch.from_numpy(np.load(ids_path).astype(np.int64))
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    return logits.reshape(-1, logits.shape[-1]).float().numpy(), None


def st_embeddings(export, texts_path):
    import torch
    from sentence_transformers import SentenceTransformer
    model = SentenceTransformer(export, device="cpu", model_kwargs={"dtype": torch.float32})
    return model.encode(hf_model_ref.read_lines(texts_path), convert_to_numpy=True), None


def pylate_vectors_and_scores(export, queries_path, documents_path):
    from pylate import models, scores
    model = models.ColBERT(export, device="cpu")

    def kept_vectors(text, is_query):
        out = model.encode([text], is_query=is_query, output_value=None)
        return out["token_embeddings"][0][out["masks"][0].astype(bool)]
    queries = [kept_vectors(t, True) for t in hf_model_ref.read_lines(queries_path)]
    documents = [kept_vectors(t, False) for t in hf_model_ref.read_lines(documents_path)]
    table = np.array([[float(scores.colbert_scores(q[None], d[None])[0, 0]) for d in documents] for q in queries])
    return np.concatenate([np.asarray(v) for v in queries + documents]), table


def layout(export):
    with open(os.path.join(export, "config.json")) as f:
        model_type = json.load(f)["model_type"]
    st_config = os.path.join(export, "config_sentence_transformers.json")
    if os.path.exists(st_config):
        with open(st_config) as f:
            return "pylate" if json.load(f).get("model_type") == "ColBERT" else "sentence-transformers"
    return model_type


def compare(name, got, path, tol):
    want = np.load(path).astype(np.float64)
    got = np.asarray(got, dtype=np.float64)
    if got.shape != want.shape:
        print(f"{name}: shape mismatch: the library's {got.shape}, spread's {want.shape}")
        return False
    diff = float(np.abs(got - want).max()) if got.size else 0.0
    print(f"{name}: max abs diff {diff:.3g} over {got.shape} (tolerance {tol:g})")
    return diff <= tol


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--export", required=True)
    ap.add_argument("--ids")
    ap.add_argument("--texts")
    ap.add_argument("--documents")
    ap.add_argument("--expect", required=True)
    ap.add_argument("--maxsim")
    ap.add_argument("--tol", type=float, default=1e-5)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is local: no hub look-ups
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    from transformers.utils import logging
    logging.disable_progress_bar()
    logging.set_verbosity_error()  # e.g. MegatronBertModel's unused pooler, which the exports leave out
    kind = layout(args.export)
    need = {"gpt2": ["ids"], "llama": ["ids"], "sentence-transformers": ["texts"],
            "pylate": ["texts", "documents"]}.get(kind)
    if need is None:
        print(f"{args.export}: no check for model_type {kind!r} (spread exports gpt2, llama, sentence-transformers, pylate)")
        return 1
    missing = [n for n in need if getattr(args, n) is None]
    if missing:
        print(f"{args.export} is a {kind} folder: give --{' --'.join(missing)}")
        return 1
    if kind in ("gpt2", "llama"):
        got, table = causal_lm_logits(args.export, args.ids)
    elif kind == "sentence-transformers":
        got, table = st_embeddings(args.export, args.texts)
    else:
        got, table = pylate_vectors_and_scores(args.export, args.texts, args.documents)
    ok = compare(f"{kind} outputs", got, args.expect, args.tol)
    if args.maxsim:
        ok = compare("MaxSim scores", table, args.maxsim, args.tol) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
