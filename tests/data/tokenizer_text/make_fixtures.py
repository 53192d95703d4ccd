"""Small tokenizer.json fixtures made with the reference library (tokenizers), for tests/test_hf_tokenizer.cpp
until tests/oracles/gen_tokenizer_fixtures.py exists. Usage: make_fixtures.py TRAIN_TEXT OUT_DIR.
Together they use every normalizer, pre-tokenizer, post-processor and decoder type spread implements, BPE and
WordPiece trained on TRAIN_TEXT, and added tokens with each option."""
import os
import sys

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

text, out = sys.argv[1], sys.argv[2]
lines = open(text, encoding="utf-8").read().split("\n")
os.makedirs(out, exist_ok=True)


def train(tok, trainer, name):
    tok.train_from_iterator(lines, trainer)
    tok.save(os.path.join(out, name + ".json"))


# WordPiece with NFKC, Lowercase, Whitespace; BertProcessing; added tokens with each option.
t = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=30))
t.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
t.pre_tokenizer = pre_tokenizers.Whitespace()
t.decoder = decoders.WordPiece(prefix="##", cleanup=False)
train(t, trainers.WordPieceTrainer(vocab_size=800, special_tokens=["[UNK]", "[CLS]", "[SEP]", "[MASK]"]), "_tmp")
t = Tokenizer.from_file(os.path.join(out, "_tmp.json"))
os.remove(os.path.join(out, "_tmp.json"))
t.post_processor = processors.BertProcessing(("[SEP]", t.token_to_id("[SEP]")), ("[CLS]", t.token_to_id("[CLS]")))
t.add_tokens([AddedToken("[MASK]", lstrip=True, rstrip=False, special=True, normalized=False),
              AddedToken("hello", single_word=True, normalized=True),
              AddedToken("WoRLD", rstrip=True, normalized=True),
              AddedToken("<x>", lstrip=True, rstrip=True, normalized=False)])
t.save(os.path.join(out, "wordpiece_nfkc_whitespace.json"))

# BPE with subword prefix and word suffix; NFD + StripAccents + Strip; Punctuation + Digits + WhitespaceSplit.
t = Tokenizer(models.BPE(unk_token="<unk>", continuing_subword_prefix="##", end_of_word_suffix="</w>", fuse_unk=True))
t.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(), normalizers.Strip()])
t.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation("contiguous"),
                                           pre_tokenizers.Digits(individual_digits=True)])
t.decoder = decoders.BPEDecoder(suffix="</w>")
train(t, trainers.BpeTrainer(vocab_size=700, special_tokens=["<unk>", "<s>", "</s>"], continuing_subword_prefix="##",
                             end_of_word_suffix="</w>", limit_alphabet=60), "bpe_suffix_punct_digits")

# Metaspace BPE with byte_fallback (as Llama's), decoders Replace + ByteFallback + Fuse + Strip; NFKD; template.
t = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
t.normalizer = normalizers.Sequence([normalizers.NFKD(), normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
t.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first", split=False)
t.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                               decoders.Strip(content=" ", left=1, right=0)])
bytes_ = ["<0x%02X>" % b for b in range(256)]
train(t, trainers.BpeTrainer(vocab_size=900, special_tokens=["<unk>", "<s>", "</s>"] + bytes_, limit_alphabet=80),
      "_tmp")
t = Tokenizer.from_file(os.path.join(out, "_tmp.json"))
os.remove(os.path.join(out, "_tmp.json"))
t.post_processor = processors.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> $B:1 </s>:1",
                                                 special_tokens=[("<s>", 1), ("</s>", 2)])
t.save(os.path.join(out, "metaspace_bytefallback.json"))

# Metaspace pre-tokenizer splitting (always), Metaspace decoder; NFC + Lowercase.
t = Tokenizer(models.BPE(unk_token="<unk>"))
t.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Lowercase()])
t.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
t.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
train(t, trainers.BpeTrainer(vocab_size=600, special_tokens=["<unk>"], limit_alphabet=70), "metaspace_split_nfc")

# Byte-level BPE with prefix space and Roberta's post-processor (trim_offsets).
t = Tokenizer(models.BPE())
t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
t.decoder = decoders.ByteLevel()
train(t, trainers.BpeTrainer(vocab_size=700, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet()), "_tmp")
t = Tokenizer.from_file(os.path.join(out, "_tmp.json"))
os.remove(os.path.join(out, "_tmp.json"))
t.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0), trim_offsets=True, add_prefix_space=True)
t.add_special_tokens([AddedToken("<mask>", lstrip=True)])
t.save(os.path.join(out, "bytelevel_roberta.json"))

# Split with a user regex (isolated and removed), ByteLevel without its regex, ByteLevel post-processor; Replace
# normalizer with a regex.
t = Tokenizer(models.BPE(ignore_merges=True))
t.normalizer = normalizers.Replace(Regex(r"\s+"), " ")
t.pre_tokenizer = pre_tokenizers.Sequence([
    pre_tokenizers.Split(Regex(r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"),
                         behavior="isolated"),
    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
t.post_processor = processors.ByteLevel(trim_offsets=True)
t.decoder = decoders.ByteLevel()
train(t, trainers.BpeTrainer(vocab_size=700, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                             special_tokens=["<|end|>"]), "split_regex_bytelevel")

# BertNormalizer with strip_accents false and no Chinese padding, BertPreTokenizer, Split on a string
# (merged with previous), Sequence post-processor.
t = Tokenizer(models.WordPiece(unk_token="[UNK]"))
t.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=False, strip_accents=False,
                                          lowercase=False)
t.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split("-", behavior="merged_with_previous"),
                                           pre_tokenizers.BertPreTokenizer()])
t.decoder = decoders.WordPiece()
train(t, trainers.WordPieceTrainer(vocab_size=900, special_tokens=["[UNK]", "[CLS]", "[SEP]"]), "_tmp")
t = Tokenizer.from_file(os.path.join(out, "_tmp.json"))
os.remove(os.path.join(out, "_tmp.json"))
t.post_processor = processors.Sequence([processors.ByteLevel(trim_offsets=False),
                                        processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                                      special_tokens=[("[CLS]", 1), ("[SEP]", 2)])])
t.save(os.path.join(out, "bert_cased_split_string.json"))
