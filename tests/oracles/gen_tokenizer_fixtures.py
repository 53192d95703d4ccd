#!/usr/bin/env python3
"""Writes tokenizer.json fixtures built by the reference library itself (Hugging Face `tokenizers`) into OUT_DIR,
for the equivalence checks of spread's tokenizer (tests/test_hf_tokenizer.cpp, tests/oracles/check_tokenizers.sh):

    python gen_tokenizer_fixtures.py OUT_DIR [--data DATA_DIR]

WordPiece, BPE (byte-level, byte fallback, subword prefix/suffix, ignore_merges) and Unigram models trained on a
fixed sample of the corpora in DATA_DIR (default ../shared/data: tinyshakespeare, scifact, stsb, sick), small
vocabularies, one thread (TOKENIZERS_PARALLELISM=false). The same data gives the same files: the trainers break
ties in hash order, so WordPiece pieces are numbered in sorted order, BPE merges ranked by length then text, and
the Unigram models built from substring counts (see each function). Together the
fixtures use every normalizer, pre-tokenizer, post-processor and decoder type that spread implements at least
once, BertNormalizer with strip_accents null, true and false, added tokens with each option (special and not,
single_word, lstrip, rstrip, normalized true and false), and truncation and padding settings (fixed and batch
longest, left and right). Prints one line per file: its name and what it exercises. Generated at test time,
never committed. The Unigram fixtures go to OUT_DIR/unigram/: spread implements the WordPiece and BPE models only.
"""
import argparse
import csv
import json
import math
import os
import sys
import time
from collections import Counter
from pathlib import Path

os.environ["TOKENIZERS_PARALLELISM"] = "false"

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
from tokenizers import trainers

BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def training_lines(data: Path):
    """A fixed sample of each corpus: mixed case, punctuation, digits, a few accents (scifact, sick)."""
    lines = (data / "tinyshakespeare" / "input.txt").read_text(encoding="utf-8").split("\n")[:1500]
    with open(data / "scifact-train" / "corpus.jsonl", encoding="utf-8") as f:
        for i, row in zip(range(150), f):
            doc = json.loads(row)
            lines += [doc.get("title", ""), doc.get("text", "")]
    with open(data / "stsb" / "stsb-en-train.csv", encoding="utf-8", newline="") as f:
        for i, row in zip(range(500), csv.reader(f)):
            lines += row[:2]
    with open(data / "sick" / "SICK.txt", encoding="utf-8") as f:
        for i, row in zip(range(500), f):
            lines += row.split("\t")[1:3]
    # Characters the corpora lack, so that the vocabularies have some (byte-level BPE has all bytes anyway).
    lines += ["café naïve résumé Ångström façade", "日本語のテキスト 中文 한국어", "ภาษาไทย العربية", "emoji 😀 👍🏽"]
    return [l for l in lines if l]


def with_added_tokens(tok: Tokenizer, specials):
    """Every added-token option: special and not, single_word, lstrip, rstrip, normalized true and false."""
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    tok.add_tokens([
        AddedToken("new york", single_word=True, normalized=True),
        AddedToken("<lstrip>", lstrip=True, normalized=False),
        AddedToken("<rstrip>", rstrip=True, normalized=False),
        AddedToken("ThOu", normalized=True),      # matched after normalisation (lower-cased where the normalizer does)
        AddedToken("HATH", normalized=False),     # matched in the raw text only
        AddedToken("<both>", lstrip=True, rstrip=True, single_word=True, special=False),
    ])
    tok.add_special_tokens([AddedToken("<sp-strip>", special=True, lstrip=True, rstrip=True)])
    return tok


def wordpiece(lines, vocab_size, normalizer, pre, **model_options):
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", **model_options))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre
    tok.train_from_iterator(lines, trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=BERT_SPECIALS,
                                                             show_progress=False))
    return canonical_wordpiece(tok)


def bytelevel_bpe(lines, vocab_size, pre, normalizer=None, specials=("<|endoftext|>",)):
    tok = Tokenizer(models.BPE())
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre
    tok.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(specials),
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                       show_progress=False))
    return canonical_bpe(tok, specials)


def canonical_wordpiece(tok: Tokenizer, specials=BERT_SPECIALS):
    """The trainer breaks ties between equally frequent pieces in hash order, so the ids vary from run to run; greedy
    longest match does not depend on the ids, so number the non-special pieces in sorted order."""
    doc = json.loads(tok.to_str())
    vocab = doc["model"]["vocab"]
    rest = sorted(t for t in vocab if t not in specials)
    doc["model"]["vocab"] = {t: i for i, t in enumerate(list(specials) + rest)}
    return Tokenizer.from_str(json.dumps(doc))


def canonical_bpe(tok: Tokenizer, specials):
    """Ties between equally frequent merges come out in hash order; rank the merges by the merged piece's length,
    then its text (a valid BPE: every merge's parts are pieces), and number the pieces to match."""
    doc = json.loads(tok.to_str())
    model = doc["model"]
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    prefix = model.get("continuing_subword_prefix") or ""

    def merged(m):
        return m[0] + (m[1][len(prefix):] if prefix and m[1].startswith(prefix) else m[1])

    merges.sort(key=lambda m: (len(merged(m)), merged(m), m[0]))
    results = []
    for m in merges:
        if merged(m) not in results:
            results.append(merged(m))
    made = set(results)
    base = list(specials) + sorted(t for t in model["vocab"] if t not in made and t not in specials)
    model["vocab"] = {t: i for i, t in enumerate(base + [t for t in results if t not in base])}
    model["merges"] = [list(m) for m in merges]
    return Tokenizer.from_str(json.dumps(doc))


def ids(tok, *names):
    return [(n, tok.token_to_id(n)) for n in names]


def fixture_wordpiece_bert(lines):
    tok = wordpiece(lines, 900, normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                           strip_accents=None, lowercase=True),
                    pre_tokenizers.BertPreTokenizer())
    tok.post_processor = processors.BertProcessing(*ids(tok, "[SEP]", "[CLS]"))
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    with_added_tokens(tok, [])
    tok.enable_truncation(max_length=64, strategy="longest_first")
    tok.enable_padding(pad_id=tok.token_to_id("[PAD]"), pad_token="[PAD]")  # batch longest, right
    return tok, "WordPiece; BertNormalizer(strip_accents null, lowercase); BertPreTokenizer; BertProcessing; " \
                "WordPiece decoder (cleanup); truncation 64; padding batch-longest"


def fixture_wordpiece_cased(lines):
    tok = wordpiece(lines, 700, normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=False,
                                                           strip_accents=True, lowercase=False),
                    pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                             pre_tokenizers.Punctuation(behavior="isolated"),
                                             pre_tokenizers.Digits(individual_digits=True)]),
                    max_input_chars_per_word=12)
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                       special_tokens=ids(tok, "[CLS]", "[SEP]"))
    tok.decoder = decoders.WordPiece(cleanup=False)
    with_added_tokens(tok, [])
    tok.enable_truncation(max_length=40, direction="left", strategy="only_first")
    tok.enable_padding(length=48, direction="left", pad_id=tok.token_to_id("[PAD]"), pad_token="[PAD]")
    return tok, "WordPiece (max_input_chars_per_word 12); BertNormalizer(strip_accents true, cased, no clean_text, " \
                "no chinese chars); Sequence(WhitespaceSplit, Punctuation isolated, Digits individual); " \
                "TemplateProcessing; truncation 40 left; padding fixed 48 left"


def fixture_wordpiece_keep_accents(lines):
    tok = wordpiece(lines, 600, normalizers.BertNormalizer(strip_accents=False, lowercase=True),
                    pre_tokenizers.Whitespace())
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=True),
        processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=ids(tok, "[CLS]", "[SEP]"))])
    tok.decoder = decoders.WordPiece()
    with_added_tokens(tok, ["<extra-special>"])
    return tok, "WordPiece; BertNormalizer(strip_accents false, lowercase); Whitespace; " \
                "Sequence(ByteLevel, TemplateProcessing) post-processor"


def fixture_gpt2_like(lines):
    tok = bytelevel_bpe(lines, 1000, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
                        normalizer=normalizers.NFC())
    tok.post_processor = processors.ByteLevel(trim_offsets=True)
    tok.decoder = decoders.ByteLevel()
    with_added_tokens(tok, [])
    return tok, "byte-level BPE (GPT-2's split pattern, no prefix space); NFC; ByteLevel post-processor and decoder"


def fixture_roberta_like(lines):
    tok = bytelevel_bpe(lines, 800, pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True),
                        normalizer=normalizers.NFKC(), specials=("<s>", "<pad>", "</s>", "<unk>", "<mask>"))
    tok.post_processor = processors.RobertaProcessing(sep=("</s>", tok.token_to_id("</s>")),
                                                      cls=("<s>", tok.token_to_id("<s>")),
                                                      trim_offsets=True, add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    tok.enable_truncation(max_length=48)
    return tok, "byte-level BPE (add_prefix_space); NFKC; RobertaProcessing; ByteLevel decoder; truncation 48"


def fixture_bytelevel_split(lines):
    tok = bytelevel_bpe(lines, 700, pre_tokenizers.Sequence([
        pre_tokenizers.Split(pattern=Regex(r"\d+|[^\s\d]+|\s+"), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]))
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.decoder = decoders.ByteLevel()
    return tok, "byte-level BPE without the regex (use_regex false) after a Split(regex, isolated); " \
                "ByteLevel post-processor (no offset trimming)"


def fixture_bpe_byte_fallback(lines):
    """Llama-style: byte fallback pieces <0x00>..<0xFF>, '▁' for spaces, merges ignored for whole-word hits."""
    byte_pieces = [f"<0x{b:02X}>" for b in range(256)]
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=900, special_tokens=["<unk>", "<s>", "</s>"] +
                                                       byte_pieces, show_progress=False))
    tok = canonical_bpe(tok, ["<unk>", "<s>", "</s>"] + byte_pieces)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=ids(tok, "<s>"))
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(content=" ", left=1, right=0)])
    with_added_tokens(tok, [])
    doc = json.loads(tok.to_str())
    doc["model"]["ignore_merges"] = True
    return Tokenizer.from_str(json.dumps(doc)), \
        "BPE with byte_fallback, fuse_unk and ignore_merges; Sequence(Prepend, Replace) normalizer; no " \
        "pre-tokenizer; TemplateProcessing; Sequence(Replace, ByteFallback, Fuse, Strip) decoder"


def fixture_bpe_prefix_suffix(lines):
    tok = Tokenizer(models.BPE(unk_token="<unk>", continuing_subword_prefix="##", end_of_word_suffix="</w>"))
    tok.normalizer = normalizers.Sequence([normalizers.NFKD(), normalizers.StripAccents(), normalizers.Lowercase(),
                                           normalizers.Strip(left=True, right=True)])
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(" ", behavior="removed"),
                                                 pre_tokenizers.Punctuation(behavior="merged_with_previous")])
    tok.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=800, special_tokens=["<unk>"],
                                                       continuing_subword_prefix="##", end_of_word_suffix="</w>",
                                                       show_progress=False))
    tok = canonical_bpe(tok, ["<unk>"])
    tok.decoder = decoders.Sequence([decoders.Replace("</w>", " "), decoders.Replace("##", ""), decoders.Fuse(),
                                     decoders.Strip(content=" ", left=0, right=1)])
    return tok, "BPE with continuing_subword_prefix and end_of_word_suffix; Sequence(NFKD, StripAccents, Lowercase, " \
                "Strip); Sequence(Split(string, removed), Punctuation merged_with_previous); Replace/Fuse/Strip decoder"


def trained_bpe(lines, vocab_size, normalizer, pre, specials):
    tok = Tokenizer(models.BPE(unk_token=specials[0]))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre
    tok.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                                       show_progress=False))
    return canonical_bpe(tok, specials)


def fixture_bpe_metaspace(lines):
    tok = trained_bpe(lines, 800, normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")]),
                      pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True),
                      ["<unk>", "<s>", "</s>"])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=ids(tok, "<s>", "</s>"))
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    with_added_tokens(tok, [])
    return tok, "BPE; Sequence(NFKC, Replace(regex)); Metaspace (always, split); TemplateProcessing; Metaspace decoder"


def fixture_bpe_metaspace_first(lines):
    tok = trained_bpe(lines, 600, normalizers.Sequence([normalizers.NFD(), normalizers.Lowercase()]),
                      pre_tokenizers.Sequence([pre_tokenizers.Metaspace(prepend_scheme="first", split=False),
                                               pre_tokenizers.Digits(individual_digits=False),
                                               pre_tokenizers.Punctuation()]),
                      ["<unk>"])
    tok.decoder = decoders.Metaspace(prepend_scheme="first", split=False)
    return tok, "BPE; Sequence(NFD, Lowercase); Sequence(Metaspace first without split, Digits grouped, Punctuation); " \
                "Metaspace decoder"


def unigram_from_counts(tok: Tokenizer, lines, vocab_size, specials, byte_fallback=False):
    """A Unigram model over the most frequent substrings (up to 5 characters) of the pre-tokenized words, scored by
    log relative frequency, with every character seen. (UnigramTrainer's EM sums floats in hash order: its scores
    differ in the 4th decimal between runs, so the fixture is built from counts, deterministically.)"""
    counts = Counter()
    for line in lines:
        text = tok.normalizer.normalize_str(line) if tok.normalizer else line
        for word, _ in tok.pre_tokenizer.pre_tokenize_str(text):
            for n in range(1, 6):
                for i in range(len(word) - n + 1):
                    counts[word[i:i + n]] += 1
    chars = sorted(p for p in counts if len(p) == 1)
    longer = sorted((p for p in counts if len(p) > 1 and counts[p] >= 3), key=lambda p: (-counts[p], p))
    byte_pieces = [f"<0x{b:02X}>" for b in range(256)] if byte_fallback else []
    pieces = chars + longer[:max(vocab_size - len(chars) - len(specials) - len(byte_pieces), 0)]
    total = sum(counts[p] for p in pieces)
    vocab = [(s, 0.0) for s in specials] + [(b, -30.0) for b in byte_pieces]
    vocab += [(p, round(math.log(counts[p] / total), 6)) for p in pieces]
    tok.model = models.Unigram(vocab, unk_id=0, byte_fallback=byte_fallback)
    return tok


def fixture_unigram_metaspace(lines):
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    unigram_from_counts(tok, lines, 1000, ["<unk>", "<s>", "</s>"], byte_fallback=True)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=ids(tok, "<s>", "</s>"))
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    with_added_tokens(tok, [])
    return tok, "Unigram with byte_fallback; Sequence(NFKC, Replace(regex)); Metaspace (always, split); TemplateProcessing; Metaspace " \
                "decoder"


def fixture_unigram_nfd_digits(lines):
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Metaspace(prepend_scheme="first", split=False),
                                                 pre_tokenizers.Digits(individual_digits=False),
                                                 pre_tokenizers.Punctuation()])
    unigram_from_counts(tok, lines, 500, ["<unk>"])
    tok.decoder = decoders.Metaspace(prepend_scheme="first", split=False)
    return tok, "Unigram; Sequence(NFD, Lowercase); Sequence(Metaspace first no split, Digits grouped, Punctuation)"


def real_modernbert_like(data: Path):
    """ModernBERT's tokenizer.json layout (answerdotai/ModernBERT-base, which is not among the shipped vocabularies)
    around GPT-2's real vocabulary and merges: a byte-level BPE without prefix space under NFC, BERT's framing by
    TemplateProcessing (type ids 0), non-special added tokens matched after normalisation (|||IP_ADDRESS||| ...), the
    BERT specials after the vocabulary with a [MASK] that takes the space before it (lstrip), and [unused*] entries."""
    gpt2 = data / "tokenizers" / "gpt2"
    tok = Tokenizer(models.BPE.from_file(str(gpt2 / "vocab.json"), str(gpt2 / "merges.txt")))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken("<|endoftext|>", special=True, normalized=False)])
    tok.add_tokens([AddedToken(t, normalized=True) for t in ("|||IP_ADDRESS|||", "|||EMAIL_ADDRESS|||",
                                                             "|||PHONE_NUMBER|||")])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t in ("<|padding|>", "[UNK]", "[CLS]", "[SEP]", "[PAD]")])
    tok.add_special_tokens([AddedToken("[MASK]", special=True, lstrip=True, normalized=False)])
    tok.add_tokens([AddedToken(f"[unused{i}]", normalized=True) for i in range(4)])
    tok.post_processor = processors.TemplateProcessing(single="[CLS]:0 $A:0 [SEP]:0",
                                                       pair="[CLS]:0 $A:0 [SEP]:0 $B:0 [SEP]:0",
                                                       special_tokens=ids(tok, "[CLS]", "[SEP]"))
    return tok, "ModernBERT's layout on GPT-2's real vocabulary: byte-level BPE; NFC; TemplateProcessing; " \
                "added tokens after the vocabulary, [MASK] with lstrip; ByteLevel decoder"


FIXTURES = [fixture_wordpiece_bert, fixture_wordpiece_cased, fixture_wordpiece_keep_accents, fixture_gpt2_like,
            fixture_roberta_like, fixture_bytelevel_split, fixture_bpe_byte_fallback, fixture_bpe_prefix_suffix,
            fixture_bpe_metaspace, fixture_bpe_metaspace_first]
# spread's Hugging Face tokenizer implements the WordPiece and BPE models only; these go to OUT_DIR/unigram/,
# where the *.json of OUT_DIR that the equivalence test reads do not include them.
UNIGRAM_FIXTURES = [fixture_unigram_metaspace, fixture_unigram_nfd_digits]
# Made from a real vocabulary of DATA_DIR/tokenizers rather than trained.
REAL_VOCABULARY_FIXTURES = [real_modernbert_like]


def main():
    repo = Path(__file__).resolve().parents[2]  # this file is tests/oracles/ of the repository
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--data", default=str(repo.parent / "shared" / "data"))
    args = parser.parse_args()
    data = Path(args.data)
    if not (data / "tinyshakespeare" / "input.txt").exists():
        sys.exit(f"{data}: no tinyshakespeare/input.txt (give --data DATA_DIR)")
    lines = training_lines(data)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "unigram").mkdir(exist_ok=True)
    for folder, makers in ((out, FIXTURES), (out / "unigram", UNIGRAM_FIXTURES)):
        for make in makers:
            start = time.perf_counter()
            tok, what = make(lines)
            name = make.__name__[len("fixture_"):] + ".json"
            tok.save(str(folder / name))
            print(f"{(folder / name).relative_to(out)}: {what} ({time.perf_counter() - start:.1f} s)")
    for make in REAL_VOCABULARY_FIXTURES:
        if not (data / "tokenizers").exists():
            print(f"{data}: no tokenizers/ for {make.__name__}: skipped")
            continue
        tok, what = make(data)
        name = make.__name__[len("real_"):] + ".json"
        tok.save(str(out / name))
        print(f"{name}: {what}")


if __name__ == "__main__":
    main()
