#!/usr/bin/env python3
"""The reference encodings that spread's Hugging Face tokenizer is judged against.

    hf_tokenize_ref.py TOKENIZER_PATH LINES_FILE OUT.jsonl [--no-special]
    hf_tokenize_ref.py --jobs JOBS.tsv     # one line per run: TOKENIZER_PATH<TAB>LINES_FILE<TAB>OUT.jsonl[<TAB>--no-special]
                                           # (one Python start for many runs, as the C++ test does)

TOKENIZER_PATH: a tokenizer.json (tokenizers.Tokenizer.from_file); a vocab.txt (transformers'
BertTokenizerFast.from_pretrained of a folder holding it and any tokenizer_config.json beside it); a vocab.json
with merges.txt beside it (GPT2TokenizerFast.from_pretrained: ByteLevel pre-tokenizer and decoder, no prefix space,
<|endoftext|> special); or a folder holding one of these, in that order. That is what a user loading the folder
with transformers gets; its backend (a tokenizers.Tokenizer) does the encoding.
LINES_FILE is read as UTF-8 and split on "\\n" only ("\\r" and every other character kept; a final empty piece
after a trailing "\\n" is not a line). One JSON object per line: ids, tokens, offsets (the Python binding's
character offsets), type_ids, attention_mask, special_tokens_mask, and decoded = decode(ids,
skip_special_tokens=True). Used by tests/test_hf_tokenizer.cpp and the comparison scripts.
"""
import json
import os
import shutil
import sys
import tempfile


def load(path):
    from tokenizers import Tokenizer
    if os.path.isdir(path):
        for name in ("tokenizer.json", "vocab.txt", "vocab.json"):
            if os.path.exists(os.path.join(path, name)):
                return load(os.path.join(path, name))
        raise SystemExit(f"{path}: no tokenizer.json, vocab.txt or vocab.json")
    name = os.path.basename(path)
    if name.endswith(".txt") or name == "vocab.json":
        # What transformers gives a user for that folder (from_pretrained; 5.3's constructors ignore vocab_file),
        # from a copy holding only these files so that a tokenizer.json beside them is not picked instead.
        from transformers import BertTokenizerFast, GPT2TokenizerFast
        folder = os.path.dirname(os.path.abspath(path))
        files = ["vocab.txt"] if name.endswith(".txt") else ["vocab.json", "merges.txt"]
        files += [n for n in ("tokenizer_config.json",) if os.path.exists(os.path.join(folder, n))]
        with tempfile.TemporaryDirectory() as tmp:
            for n in files:
                shutil.copy(path if n == "vocab.txt" else os.path.join(folder, n), os.path.join(tmp, n))
            cls = BertTokenizerFast if name.endswith(".txt") else GPT2TokenizerFast
            return cls.from_pretrained(tmp).backend_tokenizer
    return Tokenizer.from_file(path)


def run(tokenizer_path, lines_path, out_path, add_special):
    tok = load(tokenizer_path)
    with open(lines_path, "rb") as f:
        text = f.read().decode("utf-8")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    encodings = tok.encode_batch(lines, add_special_tokens=add_special) if lines else []
    with open(out_path, "w", encoding="utf-8") as out:
        for e in encodings:
            out.write(json.dumps({
                "ids": e.ids, "tokens": e.tokens, "offsets": [list(o) for o in e.offsets],
                "type_ids": e.type_ids, "attention_mask": e.attention_mask,
                "special_tokens_mask": e.special_tokens_mask,
                "decoded": reference_decode(tok, e.ids)}, ensure_ascii=False) + "\n")


def reference_decode(tok, ids):
    """decode(ids, skip_special_tokens=True), or {"reference_panicked": why} where the library itself panics
    (tokenizers 0.22.2's Strip decoder indexes an empty string: strip.rs:47 'index out of bounds: the len is 0'),
    so that a caller can count those lines instead of comparing them."""
    try:
        return tok.decode(ids, skip_special_tokens=True)
    except BaseException as e:  # pyo3's PanicException derives from BaseException
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        return {"reference_panicked": str(e)}


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--jobs":
        with open(sys.argv[2], encoding="utf-8") as f:
            for job in f.read().split("\n"):
                if job:
                    fields = job.split("\t")
                    run(fields[0], fields[1], fields[2], "--no-special" not in fields[3:])
        return
    args = [a for a in sys.argv[1:] if a != "--no-special"]
    if len(args) != 3:
        raise SystemExit(__doc__)
    run(args[0], args[1], args[2], "--no-special" not in sys.argv[1:])


if __name__ == "__main__":
    main()
