#!/usr/bin/env python3
"""Independent check of an exported tokenizer.json: the reference library itself, Hugging Face `tokenizers`
(Rust, Python bindings; the version pinned in scripts/python-requirements.txt), loads the exported folder's
tokenizer.json and must give spread's ids on every line, and decode them back to the line.

    python check_tokenizer.py EXPORT_DIR LINES.txt IDS.jsonl [--framed]

LINES.txt: one text per line ("\\n" only separates lines). IDS.jsonl: spread's ids of each line, a JSON list per
line. --framed: the ids are an encoder's "[CLS] text [SEP]", encoded with the post-processor (add_special_tokens)
and decoded without the special tokens. Nothing is adapted on the reference's side: a Unigram model with
byte_fallback gives an unknown character's UTF-8 bytes as <0xNN> pieces in `tokenizers` itself.
Exit 0 when every line matches, 1 otherwise; the first mismatches are printed.
"""
import json
import sys
from pathlib import Path

from tokenizers import Tokenizer


def main():
    args = [a for a in sys.argv[1:] if a != "--framed"]
    framed = "--framed" in sys.argv[1:]
    if len(args) != 3:
        sys.exit(__doc__)
    folder, lines_file, ids_file = args
    tokenizer = Tokenizer.from_file(str(Path(folder) / "tokenizer.json"))
    lines = Path(lines_file).read_text(encoding="utf-8").split("\n")
    expected = [json.loads(l) for l in Path(ids_file).read_text(encoding="utf-8").split("\n") if l]
    id_mismatches = decode_mismatches = 0
    for i, want in enumerate(expected):
        ids = tokenizer.encode(lines[i], add_special_tokens=framed).ids
        if ids != want:
            id_mismatches += 1
            if id_mismatches <= 3:
                print(f"line {i + 1}: ids {ids} != spread's {want}")
        text = tokenizer.decode(want, skip_special_tokens=framed)
        if text != lines[i]:
            decode_mismatches += 1
            if decode_mismatches <= 3:
                print(f"line {i + 1}: decodes to {text!r}")
    print(f"{len(expected)} lines: {id_mismatches} id mismatches, {decode_mismatches} decode mismatches")
    sys.exit(0 if id_mismatches == 0 and decode_mismatches == 0 else 1)


if __name__ == "__main__":
    main()
