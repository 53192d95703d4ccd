"""sentence-transformers' mine_hard_negatives on the data `spread mine` reads: the judge of its negatives, and the peer
whose time bench/bench_finetune.sh compares.

    python tests/oracles/mine_ref.py --model DIR (--beir DIR [--qrels NAME] | --pairs FILE.jsonl [--corpus FILE.jsonl])
                               --out FILE.jsonl [--num-negatives 3] [--range-min 0] [--range-max N]
                               [--absolute-margin M] [--relative-margin M] [--max-score S] [--min-score S]
                               [--batch-size 32] [--timing FILE.json]

The pairs are laid out as spread lays them out (data/pairs.h): a BEIR folder gives (query text, document text) for
every relevant qrel, queries in queries.jsonl order and each query's documents by id (spread keeps them in a sorted
set); a document's text is title + " " + text (either alone when the other is empty). A pairs file gives its
"anchor" and "positive" fields in file order; a corpus .jsonl gives "text" with "title" prepended as above.
Output: the n-tuple rows, {"anchor", "positive", "negative_1", ...} per line, in the library's order.
--timing writes {"load_seconds", "mine_seconds", "write_seconds"}.
"""
import argparse
import json
import os
import time

from beir_io import qrels_path, read_jsonl


def document_text(doc):
    title, text = doc.get("title") or "", doc.get("text") or ""
    return text if not title else title if not text else title + " " + text


def beir_pairs(folder, qrels_name):
    corpus = read_jsonl(os.path.join(folder, "corpus.jsonl"))
    texts = {str(d["_id"]): document_text(d) for d in corpus}
    relevant = {}
    with open(qrels_path(folder, qrels_name), encoding="utf-8") as f:
        next(f)
        for line in f:
            query, doc, score = line.rstrip("\n").split("\t")
            if float(score) > 0:
                relevant.setdefault(query, set()).add(doc)
    anchors, positives = [], []
    for q in read_jsonl(os.path.join(folder, "queries.jsonl")):
        for doc in sorted(relevant.get(str(q["_id"]), ())):
            anchors.append(q["text"])
            positives.append(texts[doc])
    return anchors, positives, [document_text(d) for d in corpus]


def file_pairs(pairs_path, corpus_path):
    rows = read_jsonl(pairs_path)
    corpus = [document_text(d) for d in read_jsonl(corpus_path)] if corpus_path else None
    return [r["anchor"] for r in rows], [r["positive"] for r in rows], corpus


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--beir")
    parser.add_argument("--qrels", default="")
    parser.add_argument("--pairs")
    parser.add_argument("--corpus")
    parser.add_argument("--out", required=True)
    parser.add_argument("--num-negatives", type=int, default=3)
    parser.add_argument("--range-min", type=int, default=0)
    parser.add_argument("--range-max", type=int)
    parser.add_argument("--absolute-margin", type=float)
    parser.add_argument("--relative-margin", type=float)
    parser.add_argument("--max-score", type=float)
    parser.add_argument("--min-score", type=float)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--timing")
    args = parser.parse_args()

    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # every model is a local folder: no hub look-ups
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    start = time.perf_counter()
    import torch
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.util import mine_hard_negatives

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    model = SentenceTransformer(args.model, device="cpu")
    if args.beir:
        anchors, positives, corpus = beir_pairs(args.beir, args.qrels)
    else:
        anchors, positives, corpus = file_pairs(args.pairs, args.corpus)
    dataset = Dataset.from_dict({"anchor": anchors, "positive": positives})
    loaded = time.perf_counter()
    mined = mine_hard_negatives(
        dataset, model, corpus=corpus, num_negatives=args.num_negatives, range_min=args.range_min,
        range_max=args.range_max, absolute_margin=args.absolute_margin, relative_margin=args.relative_margin,
        max_score=args.max_score, min_score=args.min_score, sampling_strategy="top", output_format="n-tuple",
        batch_size=args.batch_size, use_faiss=False, verbose=False)
    done = time.perf_counter()
    with open(args.out, "w", encoding="utf-8") as f:
        for row in mined:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    written = time.perf_counter()
    if args.timing:
        with open(args.timing, "w", encoding="utf-8") as f:
            json.dump({"load_seconds": loaded - start, "mine_seconds": done - loaded,
                       "write_seconds": written - done, "rows": len(mined)}, f)


if __name__ == "__main__":
    main()
