#!/usr/bin/env python3
"""BM25 on a BEIR folder, the lexical baseline of experiments/exp_contrastive.sh (context, not a product feature).
Okapi BM25 (k1 = 1.2, b = 0.75, idf = ln(1 + (N - df + 0.5) / (df + 0.5)), Lucene's form), documents = title + " " +
text, tokens = lowercase alphanumeric runs (no stemming, no stop words: below Elasticsearch's English analyzer, which
BEIR's published BM25 numbers use). Metrics as spread's (docs/design.md §8.3): binary relevance, ties by corpus id,
nDCG@10, MRR@10, Recall@100 over the queries with a relevant document. Prints one JSON line.
    python3 experiments/bm25_ref.py ${SPREAD_DATA:-../shared/data}/scifact-train [--qrels train]
"""
import argparse
import collections
import json
import math
import os
import re

TOKEN = re.compile(r"[a-z0-9]+")


def tokens(text):
    return TOKEN.findall(text.lower())


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load(folder, qrels_name):
    corpus = {str(d["_id"]): (d.get("title", "") + " " + d.get("text", "")).strip()
              for d in read_jsonl(os.path.join(folder, "corpus.jsonl"))}
    queries = {str(q["_id"]): q["text"] for q in read_jsonl(os.path.join(folder, "queries.jsonl"))}
    qrels = collections.defaultdict(set)
    with open(os.path.join(folder, "qrels", qrels_name + ".tsv"), encoding="utf-8") as f:
        next(f)
        for line in f:
            qid, did, score = line.rstrip("\r\n").split("\t")
            if float(score) > 0:
                qrels[qid].add(did)
    return corpus, queries, qrels


def bm25_scores(query, index, k1=1.2, b=0.75):
    postings, lengths, avg_len, n = index
    scores = collections.defaultdict(float)
    for term in set(tokens(query)):
        docs = postings.get(term)
        if not docs:
            continue
        idf = math.log(1.0 + (n - len(docs) + 0.5) / (len(docs) + 0.5))
        for doc, tf in docs.items():
            scores[doc] += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * lengths[doc] / avg_len))
    return scores


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("--qrels", default="train")
    args = ap.parse_args()
    corpus, queries, qrels = load(args.folder, args.qrels)
    postings, lengths = collections.defaultdict(dict), {}
    for doc, text in corpus.items():
        counts = collections.Counter(tokens(text))
        lengths[doc] = sum(counts.values())
        for term, tf in counts.items():
            postings[term][doc] = tf
    index = (postings, lengths, sum(lengths.values()) / len(lengths), len(lengths))
    ndcg = mrr = recall = 0.0
    evaluated = [q for q in qrels if q in queries]
    for qid in evaluated:
        scores = bm25_scores(queries[qid], index)
        ranked = sorted(corpus, key=lambda d: (-scores.get(d, 0.0), d))
        relevant = qrels[qid]
        dcg = sum(1 / math.log2(r + 2) for r, d in enumerate(ranked[:10]) if d in relevant)
        idcg = sum(1 / math.log2(r + 2) for r in range(min(10, len(relevant))))
        ndcg += dcg / idcg
        mrr += next((1 / (r + 1) for r, d in enumerate(ranked[:10]) if d in relevant), 0.0)
        recall += len(relevant & set(ranked[:100])) / len(relevant)
    n = len(evaluated)
    print(json.dumps({"queries": n, "ndcg@10": ndcg / n, "mrr@10": mrr / n, "recall@100": recall / n}))


if __name__ == "__main__":
    main()
