#!/usr/bin/env python3
"""Writes the lines that tests/oracles/check_tokenizers.sh and bench/bench_tokenize.sh tokenize into OUT_DIR/corpora:

    python tokenizer_corpora.py OUT_DIR [--data DATA_DIR] [--adversarial FILE]

  corpora/NAME.txt   every line of every text corpus in DATA_DIR, one text per line: tinyshakespeare; scifact
                     corpus (title and text of each document) and queries; stsb (both sentences of each row); sick
                     (sentence_A, sentence_B); the WordNet data files of Debian's wordnet-base (/usr/share/wordnet,
                     the Debian packages text) when installed; the adversarial file and invalid_utf8.txt beside it. A text holding "\\n" is
                     split there (a line is one text). Lines that are not valid UTF-8 go to NAME.invalid.txt instead.
"""
import argparse
import csv
import json
from pathlib import Path



def corpus_texts(data: Path):
    yield "tinyshakespeare", (data / "tinyshakespeare" / "input.txt").read_bytes().split(b"\n")
    docs = [json.loads(l) for l in open(data / "scifact-train" / "corpus.jsonl", encoding="utf-8")]
    yield "scifact-corpus", [t.encode() for d in docs for t in (d.get("title", ""), d.get("text", ""))]
    queries = [json.loads(l) for l in open(data / "scifact-train" / "queries.jsonl", encoding="utf-8")]
    yield "scifact-queries", [q["text"].encode() for q in queries]
    rows = []
    for name in ("stsb-en-train.csv", "stsb-en-dev.csv"):
        with open(data / "stsb" / name, encoding="utf-8", newline="") as f:
            rows += [t.encode() for row in csv.reader(f) for t in row[:2]]
    yield "stsb", rows
    with open(data / "sick" / "SICK.txt", encoding="utf-8") as f:
        next(f)
        yield "sick", [t.encode() for row in f for t in row.rstrip("\n").split("\t")[1:3]]
    wordnet = Path("/usr/share/wordnet")
    if wordnet.is_dir():
        lines = []
        for part in ("noun", "verb", "adj", "adv"):
            if (wordnet / f"data.{part}").exists():
                lines += (wordnet / f"data.{part}").read_bytes().split(b"\n")
        yield "wordnet", lines


def write_corpus(out: Path, name: str, texts):
    lines = [l for t in texts for l in t.split(b"\n")]
    while lines and lines[-1] == b"":
        lines.pop()
    good, bad = [], []
    for line in lines:
        try:
            line.decode("utf-8")
            good.append(line)
        except UnicodeDecodeError:
            bad.append(line)
    (out / f"{name}.txt").write_bytes(b"".join(l + b"\n" for l in good))
    if bad:
        (out / f"{name}.invalid.txt").write_bytes(b"".join(l + b"\n" for l in bad))
    print(f"corpus {name}: {len(good)} lines" + (f", {len(bad)} invalid UTF-8 lines apart" if bad else ""))


def main():
    repo = Path(__file__).resolve().parents[2]  # this file is tests/oracles/ of the repository
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--data", default=str(repo.parent / "shared" / "data"))
    parser.add_argument("--adversarial", default=str(repo / "tests" / "data" / "tokenizer_text" / "adversarial.txt"))
    args = parser.parse_args()
    data, out = Path(args.data), Path(args.out_dir)
    (out / "corpora").mkdir(parents=True, exist_ok=True)
    for name, texts in corpus_texts(data):
        write_corpus(out / "corpora", name, texts)
    adversarial = Path(args.adversarial)
    for path in (adversarial, adversarial.parent / "invalid_utf8.txt"):
        if path.exists():
            write_corpus(out / "corpora", path.stem, [path.read_bytes()])
        else:
            print(f"corpus {path.stem}: {path} missing, left out")


if __name__ == "__main__":
    main()
