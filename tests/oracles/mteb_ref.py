"""The leaderboard's scores of a sentence-transformers folder, as MTEB computes them: the judge of `spread eval --model`.

    python tests/oracles/mteb_ref.py --model DIR [--sts CSV] [--beir DIR [--qrels NAME]] --out FILE.json

Encoding is SentenceTransformer(DIR).encode (the folder's pooling, Normalize and max_seq_length). The metrics are
MTEB's (its STSEvaluator and RetrievalEvaluator, written out here because the mteb package pins other versions of the
reference libraries than scripts/python-requirements.txt):
- STS: scipy.stats.spearmanr(gold, 1 - paired cosine distance) of the two sentences' embeddings;
- retrieval: every corpus document as (title + " " + text).strip() (text.strip() when there is no title), queries
  as given; cosine similarity; the top 1,000 documents of each query into pytrec_eval (trec_eval's nDCG with linear
  gains, ties broken by document id as trec_eval does) for ndcg_cut_10 and recall_100, averaged over the queries of
  the qrels file. MTEB rounds the means to 5 decimals; this prints them unrounded.
Only the queries with at least one relevant document (score > 0) count, as in spread's BEIR reader.
Writes {"sts_spearman", "sts_pairs", "ndcg@10", "recall@100", "queries", "documents"} (the keys of what was given).
"""
import argparse
import csv
import json
import os

import numpy as np
import pytrec_eval
import scipy.stats
from beir_io import qrels_path, read_jsonl

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # every model is a local folder: no hub look-ups
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402

TOP_K = 1000


def encode(model, texts, batch_size):
    return model.encode(texts, batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)


def sts_score(model, path, batch_size):
    with open(path, newline="", encoding="utf-8") as f:
        rows = [r for r in csv.reader(f) if r]
    first = [r[0] for r in rows]
    second = [r[1] for r in rows]
    gold = [float(r[2]) for r in rows]
    a, b = encode(model, first, batch_size), encode(model, second, batch_size)
    cosine = np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return {"sts_spearman": float(scipy.stats.spearmanr(gold, cosine).statistic), "sts_pairs": len(rows)}


def read_qrels(path):
    qrels = {}
    with open(path, encoding="utf-8") as f:
        next(f)
        for line in f:
            query, doc, score = line.rstrip("\n").split("\t")
            qrels.setdefault(query, {})[doc] = int(float(score))
    return {q: docs for q, docs in qrels.items() if any(s > 0 for s in docs.values())}


def document_text(doc):
    title = doc.get("title")
    return (title + " " + doc["text"]).strip() if title is not None else doc["text"].strip()


def retrieval_score(model, folder, qrels_name, batch_size):
    corpus = read_jsonl(os.path.join(folder, "corpus.jsonl"))
    qrels = read_qrels(qrels_path(folder, qrels_name))
    queries = [q for q in read_jsonl(os.path.join(folder, "queries.jsonl")) if str(q["_id"]) in qrels]
    doc_ids = [str(d["_id"]) for d in corpus]
    docs = torch.from_numpy(encode(model, [document_text(d) for d in corpus], batch_size))
    embedded = torch.from_numpy(encode(model, [q["text"] for q in queries], batch_size))
    cosine = torch.nn.functional.normalize(embedded, dim=1) @ torch.nn.functional.normalize(docs, dim=1).T
    scores, top = torch.topk(cosine, k=min(TOP_K, len(doc_ids)), dim=1)
    run = {str(q["_id"]): {doc_ids[j]: float(s) for s, j in zip(scores[i].tolist(), top[i].tolist())}
           for i, q in enumerate(queries)}
    measured = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100"}).evaluate(run)
    n = len(measured)
    return {"ndcg@10": sum(m["ndcg_cut_10"] for m in measured.values()) / n,
            "recall@100": sum(m["recall_100"] for m in measured.values()) / n,
            "queries": n, "documents": len(doc_ids)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--sts")
    parser.add_argument("--beir")
    parser.add_argument("--qrels", default="")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    model = SentenceTransformer(args.model, device="cpu")
    result = {}
    if args.sts:
        result.update(sts_score(model, args.sts, args.batch_size))
    if args.beir:
        result.update(retrieval_score(model, args.beir, args.qrels, args.batch_size))
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
