#!/usr/bin/env python3
"""Writes the seed inputs of the fuzz targets into tests/fuzz/corpus/<target>/ (committed; regenerate with
scripts/fuzz.sh --seeds). Seeds are small real files: tiny random models saved by transformers, sentence-transformers
and PyLate; tokenizers trained by `tokenizers` with the pipelines of BERT, GPT-2, Llama and ModernBERT; spread's own
run files (tokenizers, token file, checkpoint) from a two-step run of the built binary; the project's recipes and
data fixtures. accepted_* seeds must be read by their target, refused_* ones refused (tests/test_fuzz_corpus.cpp):
among the latter, the inputs of the probe's defects D1 (deep JSON), D4 (a regex that backtracks without end) and
D5 (a deeply nested Sequence), which the targets must keep catching.

usage: make_seeds.py SPREAD_BINARY   (run with the reference environment's python, scripts/python_env.sh)
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save, save_file

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fuzz" / "corpus"
DATA = ROOT / "tests" / "data"
TEXT = (DATA / "tokenizer" / "corpus.txt").read_text(encoding="utf-8")[:20000]


def put(target, name, data):
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))


def bundle(folder, names=None):
    """The files of `folder` (or only `names`) as a bundle (tests/fuzz/fuzz_targets.h)."""
    folder = Path(folder)
    files = names or sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    # The newline before each "=== " line belongs to the separator, not to the file before it.
    return b"\n".join(b"=== " + name.encode() + b"\n" + (folder / name).read_bytes() for name in files)


def deep_json(depth=20000):
    return "[" * depth + "]" * depth


# --- models ----------------------------------------------------------------------------------------------------------

def tiny_models(work):
    from transformers import (BertConfig, BertModel, GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM,
                              ModernBertConfig, ModernBertModel)
    torch.manual_seed(0)
    models = {
        "bert": BertModel(BertConfig(vocab_size=40, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=16, max_position_embeddings=16, type_vocab_size=2),
                          add_pooling_layer=False),
        "gpt2": GPT2LMHeadModel(GPT2Config(vocab_size=40, n_embd=8, n_layer=1, n_head=2, n_positions=16)),
        "llama": LlamaForCausalLM(LlamaConfig(vocab_size=40, hidden_size=8, num_hidden_layers=1,
                                              num_attention_heads=2, num_key_value_heads=1, intermediate_size=16,
                                              max_position_embeddings=16)),
        "modernbert": ModernBertModel(ModernBertConfig(vocab_size=40, hidden_size=8, num_hidden_layers=1,
                                                       num_attention_heads=2, intermediate_size=16,
                                                       max_position_embeddings=16, local_attention=4,
                                                       pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                                       cls_token_id=1, sep_token_id=2)),
    }
    dirs = {}
    for name, model in models.items():
        d = work / name
        model.save_pretrained(d, safe_serialization=True)
        dirs[name] = d
    sharded = work / "bert_sharded"
    models["bert"].save_pretrained(sharded, safe_serialization=True, max_shard_size="2KB")
    dirs["bert_sharded"] = sharded
    return dirs


def model_seeds(work):
    dirs = tiny_models(work)
    for name, d in dirs.items():
        if name != "bert_sharded":
            put("model_config", f"accepted_{name}_config.json", (d / "config.json").read_bytes())
        keep = [p for p in ["config.json", "model.safetensors", "model.safetensors.index.json"] if (d / p).exists()]
        keep += sorted(p.name for p in d.glob("model-*.safetensors"))
        put("model_folder", f"accepted_{name}", bundle(d, keep))
    minilm = Path(os.environ.get("SPREAD_MODELS", ROOT / "models")) / "all-MiniLM-L6-v2"
    if (minilm / "config.json").exists():
        put("model_config", "accepted_minilm_config.json", (minilm / "config.json").read_bytes())
    put("model_config", "refused_d1_deep.json", '{"architectures": ["BertModel"], "x": ' + deep_json() + "}")
    config = json.loads((dirs["bert"] / "config.json").read_text())
    put("model_config", "refused_zero_width.json", json.dumps({**config, "hidden_size": 0}))
    put("model_config", "refused_negative_eps.json", json.dumps({**config, "layer_norm_eps": -1}))

    st_dir, pylate_dir = sentence_folders(work, dirs["bert"])
    st_files = ["modules.json", "config_sentence_transformers.json", "sentence_bert_config.json",
                "1_Pooling/config.json", "config.json", "model.safetensors"]
    put("model_folder", "accepted_sentence_transformers", bundle(st_dir, [f for f in st_files if (st_dir / f).exists()]))
    pylate_files = ["modules.json", "config_sentence_transformers.json", "sentence_bert_config.json", "config.json",
                    "model.safetensors"] + sorted(str(p.relative_to(pylate_dir)) for p in pylate_dir.glob("1_Dense/*"))
    put("model_folder", "accepted_pylate", bundle(pylate_dir, [f for f in pylate_files if (pylate_dir / f).exists()]))
    put("model_folder", "refused_module_path_outside",
        (CORPUS / "model_folder" / "accepted_sentence_transformers").read_bytes().replace(
            b'"path": ""', b'"path": "../other"', 1))

    weights = (dirs["bert"] / "model.safetensors").read_bytes()
    put("safetensors", "accepted_tiny_bert.safetensors", weights)
    typed = work / "typed.safetensors"
    save_file({"f16": torch.ones(3, 2, dtype=torch.float16), "bf16": torch.ones(2, dtype=torch.bfloat16),
               "i64": torch.arange(4), "u8": torch.arange(3, dtype=torch.uint8), "b": torch.tensor([True, False]),
               "empty": torch.zeros(0, 3)}, typed, metadata={"format": "pt"})
    put("safetensors", "accepted_dtypes.safetensors", typed.read_bytes())
    put("safetensors", "refused_truncated.safetensors", weights[: len(weights) // 2])
    header = deep_json(1000).encode()
    put("safetensors", "refused_d1_deep_header.safetensors", struct.pack("<Q", len(header)) + header)


def sentence_folders(work, bert_dir):
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import BertTokenizerFast
    from sentence_transformers import SentenceTransformer, models as st_models
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list("abcdefghijklmnopqrstuvwxyz.,!?") + \
            ["##s", "##e", "the", "cell"]
    (work / "vocab.txt").write_text("\n".join(vocab[:40]) + "\n")
    tokenizer = BertTokenizerFast(vocab_file=str(work / "vocab.txt"))
    tokenizer.save_pretrained(bert_dir)
    transformer = st_models.Transformer(str(bert_dir), max_seq_length=12)
    st = SentenceTransformer(modules=[transformer, st_models.Pooling(8, "mean"), st_models.Normalize()])
    st_dir = work / "st"
    st.save(str(st_dir))
    from pylate import models as pylate_models
    colbert = pylate_models.ColBERT(model_name_or_path=str(bert_dir), embedding_size=4, query_length=8,
                                    document_length=12, device="cpu")
    pylate_dir = work / "pylate"
    colbert.save(str(pylate_dir))
    return st_dir, pylate_dir


# --- tokenizers -------------------------------------------------------------------------------------------------------

def tokenizer_seeds(work):
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    lines = TEXT.splitlines()

    bert = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    bert.normalizer = normalizers.BertNormalizer(lowercase=True)
    bert.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    bert.train_from_iterator(lines, trainers.WordPieceTrainer(vocab_size=120, special_tokens=[
        "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    bert.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", bert.token_to_id("[CLS]")), ("[SEP]", bert.token_to_id("[SEP]"))])
    bert.decoder = decoders.WordPiece()

    gpt2 = Tokenizer(models.BPE())
    gpt2.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    gpt2.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"],
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    gpt2.post_processor = processors.ByteLevel(trim_offsets=False)
    gpt2.decoder = decoders.ByteLevel()

    llama = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    llama.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    llama.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=200, special_tokens=["<unk>", "<s>", "</s>"]))
    llama.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                       decoders.Strip(" ", 1, 0)])

    split = Tokenizer(models.WordPiece({"[UNK]": 0, "a": 1, "b": 2, "ab": 3, "##b": 4}, unk_token="[UNK]"))
    split.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase(), normalizers.StripAccents()])
    split.pre_tokenizer = pre_tokenizers.Split(Regex(r"[a-z]+|\d"), behavior="isolated")
    split.add_special_tokens(["<mask>"])
    split.add_tokens(["hello world"])

    for name, tok in [("bert", bert), ("gpt2", gpt2), ("llama", llama), ("split_regex", split)]:
        put("tokenizer_json", f"accepted_{name}.json", tok.to_str() + "\n=== text\n" + TEXT[:200])
    put("tokenizer_json", "refused_d1_deep.json", bert.to_str()[:-1] + ', "x": ' + deep_json() + "}")
    catastrophic = json.loads(split.to_str())
    catastrophic["pre_tokenizer"] = {"type": "Split", "pattern": {"Regex": "(a+)+$"}, "behavior": "Isolated",
                                     "invert": False}
    put("tokenizer_json", "refused_d4_catastrophic_regex.json",
        json.dumps(catastrophic) + "\n=== text\n" + "a" * 38 + "b")
    nested = '{"type": "Sequence", "normalizers": [' * 1000 + '{"type": "Lowercase"}' + "]}" * 1000
    deep_sequence = split.to_str()
    start = deep_sequence.index('"normalizer":') + len('"normalizer":')
    end = deep_sequence.index('"pre_tokenizer":')
    put("tokenizer_json", "refused_d5_nested_sequence.json", deep_sequence[:start] + nested + "," +
        deep_sequence[end:])

    vocab = json.loads(bert.to_str())["model"]["vocab"]
    vocab_txt = "\n".join(sorted(vocab, key=vocab.get)) + "\n"
    put("tokenizer_folder", "accepted_vocab_txt", "=== vocab.txt\n" + vocab_txt)
    put("tokenizer_folder", "accepted_vocab_txt_cased",
        "=== vocab.txt\n" + vocab_txt + "=== tokenizer_config.json\n" + '{"do_lower_case": false}\n')
    bpe = json.loads(gpt2.to_str())["model"]
    merges = "\n".join(m if isinstance(m, str) else " ".join(m) for m in bpe["merges"])
    put("tokenizer_folder", "accepted_vocab_json_merges",
        "=== vocab.json\n" + json.dumps(bpe["vocab"], ensure_ascii=False) + "\n=== merges.txt\n#version: 0.2\n" +
        merges + "\n")
    return {"bert": bert}


# --- spread's own files ----------------------------------------------------------------------------------------------

def spread_run_seeds(spread, work, hf_tokenizer_json):
    text = work / "input.txt"
    text.write_text(TEXT[:4000], encoding="utf-8")
    (work / "hf_tokenizer.json").write_text(hf_tokenizer_json, encoding="utf-8")
    runs = {"char": '[tokenizer]\nkind = "char"\n',
            "bpe": '[tokenizer]\nkind = "bpe"\nvocab_size = 400\n',
            "hf": f'[tokenizer]\nkind = "hf"\npath = "{work / "hf_tokenizer.json"}"\n'}
    for name, tokenizer in runs.items():
        recipe = work / f"{name}.toml"
        recipe.write_text(f'[run]\nname = "{name}"\nout_dir = "{work}"\nthreads = 1\n'
                          f'[data]\nsource = "text"\npath = "{text}"\n{tokenizer}'
                          '[model]\nn_layer = 1\nn_head = 1\nn_embd = 8\nblock_size = 8\n'
                          '[train]\nbatch_size = 2\nmax_steps = 1\neval_every = 0\nckpt_every = 1\n')
        subprocess.run([spread, "train", str(recipe)], check=True, stdout=subprocess.DEVNULL)
    char_run, bpe_run, hf_run = work / "char", work / "bpe", work / "hf"
    put("char_tokenizer", "accepted_run.chars", (char_run / "tokenizer.chars").read_bytes())
    put("run_tokenizer", "accepted_char", bundle(char_run, ["tokenizer.json", "tokenizer.chars"]))
    put("run_tokenizer", "accepted_hf", bundle(hf_run, ["tokenizer.json", "tokenizer.hf.json"]))
    model = bpe_run / "tokenizer.model"
    put("sentencepiece", "accepted_bpe.model", model.read_bytes())
    put("run_tokenizer", "accepted_bpe", bundle(bpe_run, ["tokenizer.json", "tokenizer.model"]))
    ckpts = sorted((char_run / "ckpt").glob("*.ckpt"))
    put("checkpoint", "accepted_char_run_payload", ckpts[-1].read_bytes()[24:])
    put("checkpoint", "refused_model_weights_without_spread_meta", save({"w": torch.ones(2)}, {"format": "pt"}))
    put("checkpoint", "refused_meta_without_step",
        save({"w": torch.ones(2)}, {"format": "pt", "spread.checkpoint": '{"note":1}'}))
    put("token_file", "accepted_val.bin", (char_run / "val.bin").read_bytes())
    put("token_file", "refused_truncated.bin", (char_run / "val.bin").read_bytes()[:-3])
    put("sentence_record", "accepted_record.json", json.dumps(
        {"normalize": True, "include_prompt": False, "prompts": {"query": "query: "}, "default_prompt_name": ""}))


def llmc_shard(version, count, tokens, source_bytes=None):
    # source_bytes: spread's extension, header[3] = "SPRD" and header[4..5] = the text's uint64 byte count
    extension = [0, 0, 0] if source_bytes is None else [0x44525053, source_bytes & 0xFFFFFFFF, source_bytes >> 32]
    header = [20240520, version, count] + extension + [0] * 250
    return (struct.pack("<3i", *header[:3]) + struct.pack("<3I", *header[3:6]) + struct.pack("<250i", *header[6:]) +
            struct.pack("<%d%s" % (len(tokens), "H" if version == 1 else "I"), *tokens))


def shard_and_choices_seeds():
    put("token_file", "accepted_llmc_shard_v1.bin", llmc_shard(1, 6, [50256, 1, 2, 65535, 7, 300]))
    put("token_file", "accepted_llmc_shard_v2_uint32.bin", llmc_shard(2, 3, [70000, 1, 2]))
    put("token_file", "accepted_llmc_shard_with_byte_count.bin", llmc_shard(1, 4, [464, 3797, 3332, 50256], 19))
    put("token_file", "refused_llmc_count_past_the_file.bin", llmc_shard(1, 7, [1, 2, 3]))
    put("token_file", "refused_llmc_negative_count.bin", llmc_shard(1, -2, [1, 2]))
    items = [{"context": "The cat sat on the", "endings": [" mat.", " moon."], "label": 0},
             {"context": "Caf\u00e9 au lait", "endings": [" co\u00fbte", " \u00e9norme", "x"], "label": 2,
              "extra": [1, {"a": None}]}]
    put("choices", "accepted_items.jsonl", "".join(json.dumps(i) + "\n" for i in items))
    put("choices", "refused_label_out_of_range.jsonl", '{"context": "a", "endings": ["b", "c"], "label": 5}\n')
    put("choices", "refused_nested_300_deep.jsonl", "[" * 300 + "]" * 300 + "\n")
    put("jsonl_documents", "accepted_documents.jsonl",
        '{"text": "The cat sat on the mat.", "id": 1}\n\n{"text": "caf\\u00e9 \\u00e9norme", "meta": {"a": [1, 2]}}\n')
    put("jsonl_documents", "refused_no_text_key.jsonl", '{"body": "no text here"}\n')
    put("jsonl_documents", "refused_nested_300_deep.jsonl", '{"text": ' + "[" * 300 + "]" * 300 + "}\n")


MIX_RECIPE = ('[train]\nobjective = "lm"\n[tokenizer]\nkind = "hf"\npath = "gpt2/tokenizer.json"\n'
              '[data]\nval_shards = "fw/val_*.bin"\n[[data.mix]]\nshards = "fw/train_*.bin"\nweight = 0.7\n'
              '[[data.mix]]\nshards = "code/train_*.bin"\nweight = 0.3\n')


def data_seeds():
    # Recipes that name a model folder are checked against it later; parsed alone, some are refused.
    for recipe in sorted((ROOT / "recipes").glob("*.toml")):
        standalone = recipe.name in ("quickstart.toml", "shakespeare_char.toml", "llama_tiny.toml")
        # ${data_root} is checked to exist (its default depends on the working directory): a plain relative folder
        # is not, so the seed reads the same wherever the suite runs.
        text = recipe.read_text(encoding="utf-8").replace("${data_root}", "data")
        put("recipe", ("accepted_" if standalone else "input_") + recipe.name, text)
    put("recipe", "refused_unknown_key.toml", '[train]\nno_such_key = 1\n')
    put("recipe", "accepted_shard_mix.toml", MIX_RECIPE)
    put("recipe", "refused_shard_mix_zero_weight.toml", MIX_RECIPE.replace("weight = 0.3", "weight = 0"))
    put("recipe_set", "accepted_overrides", "train.lr=3e-4\nmodel.n_layer=2\nloss.dispersion.lambda=0.1\n"
                                            'train.objective="lm"\n')
    put("recipe_set", "refused_bad_key", "train.no_such=1\n")
    pairs = DATA / "pairs"
    for f in sorted(pairs.glob("*")):
        if f.is_file():
            target = {".tsv": "pairs_tsv", ".csv": "pairs_csv", ".jsonl": "pairs_jsonl"}.get(f.suffix)
            if target:
                prefix = "accepted_" if f.stem == "good" else "input_"
                put(target, prefix + f.name, f.read_bytes())
    put("pairs_jsonl", "accepted_pairs.jsonl",
        "\n".join(json.dumps({"anchor": f"q {i}", "positive": f"p {i}", "negative": f"n {i}"}) for i in range(6)))
    put("sts_csv", "accepted_sts_tiny.csv", (DATA / "sts_tiny.csv").read_bytes())
    put("sts_csv", "refused_one_pair.csv", "sentence1,sentence2,score\na,b,1.0\n")
    beir = DATA / "beir_tiny"
    put("beir", "accepted_beir_tiny", bundle(beir))
    for f in ["clustered_3.npy", "chain_tie_4.npy", "lattice_17.npy"]:
        put("npy", "accepted_" + f, (DATA / "ward" / f).read_bytes())
    f32 = Path(tempfile.mkdtemp()) / "f32.npy"
    np.save(f32, np.arange(12, dtype=np.float32).reshape(3, 4))
    put("npy", "accepted_float32.npy", f32.read_bytes())
    put("npy", "refused_fortran.npy", f32.read_bytes().replace(b"'fortran_order': False", b"'fortran_order': True "))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    spread = sys.argv[1]
    # The seeds only: inputs that fuzzing found (crash_*, kept in git) stay.
    for old in CORPUS.glob("*/*"):
        if old.name.startswith(("accepted_", "refused_", "input_")):
            old.unlink()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model_seeds(work)
        toks = tokenizer_seeds(work)
        spread_run_seeds(spread, work, toks["bert"].to_str())
        data_seeds()
        shard_and_choices_seeds()
    print(f"seeds written to {CORPUS}")


if __name__ == "__main__":
    main()
