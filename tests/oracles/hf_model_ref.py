#!/usr/bin/env python3
"""Tiny random Hugging Face model folders, and the outputs the real libraries give for them: the judge of
spread's import of such folders (transformers 5.3, sentence-transformers 5.3, PyLate 1.6; CPU, no hub).

    hf_model_ref.py make KIND OUT_DIR --tokenizer TOKDIR [options]
    hf_model_ref.py hidden MODEL_DIR TEXTS_FILE OUT.json [--batch]
    hf_model_ref.py st-encode MODEL_DIR TEXTS_FILE OUT.json [--prompt-name NAME] [--batch-size N]
    hf_model_ref.py generate MODEL_DIR PROMPTS_FILE OUT.json [--max-new-tokens 32]
    hf_model_ref.py pylate MODEL_DIR QUERIES_FILE DOCS_FILE OUT.json [--head-from EXPORT_DIR ...]
    hf_model_ref.py pylate-loss MODEL_DIR QUERIES_FILE DOCS_FILE NEGATIVES_FILE OUT.json
    hf_model_ref.py st-loss MODEL_DIR ANCHORS_FILE POSITIVES_FILE NEGATIVES_FILE OUT.json
    hf_model_ref.py choices MODEL_DIR CHOICES_JSONL OUT.json
    hf_model_ref.py --jobs JOBS.txt    # one command above a line (split with shlex), all in one Python process

make KIND: bert (BertModel with its pooler), bert-mlm (BertForMaskedLM), megatron-bert (MegatronBertModel: the
pre-LayerNorm BERT, the layout of spread's encoder exports), distilbert / distilbert-mlm (DistilBertModel /
DistilBertForMaskedLM: BERT's blocks without token types; its forward gets no token_type_ids), roberta /
roberta-mlm (RobertaModel / RobertaForMaskedLM: pad_token_id 1, so positions start at 2; max-position + 2 rows;
with BERT's vocabulary), gpt2
(GPT2LMHeadModel), llama (LlamaForCausalLM:
RMSNorm, rotary positions, SwiGLU, grouped-query attention; with GPT-2's byte-level vocabulary), modernbert /
modernbert-mlm (ModernBertModel / ModernBertForMaskedLM: local attention, two rotary bases, gated GELU; with BERT's
WordPiece vocabulary, since ModernBERT's own tokenizer is not among the shipped ones), st (a
sentence-transformers folder: Transformer around a `bert` model, Pooling, optional Normalize), pylate (a PyLate
ColBERT built from a `bert` model: Transformer, then 1_Dense projecting to --dim, no bias). Options: --seed (0)
--layers (2) --heads (2) --width (32) --intermediate (4*width) --eps (1e-12 bert, 1e-5 gpt2) --act (gelu /
gelu_new) --max-position (64) --type-vocab (2) --dtype float32|float16|bfloat16 (the saved weights) --shards N
(sharded safetensors + model.safetensors.index.json; the nearest count the sizes allow is printed) --prefix (bert:
BertModel's weights saved under "bert.", as the encoder of a BertFor* checkpoint; config still says BertModel)
--no-safetensors (pytorch_model.bin: the safetensors transformers wrote, re-saved with torch.save, since 5.3
writes safetensors only) --pad-vocab N (the embedding table N rows longer than the tokenizer, as models padded to
a multiple of 8 or 64 have); llama: --kv-heads (= heads) --rope-theta (10000) --tie (tied embeddings; default
untied), intermediate 3*width, eps 1e-6; modernbert: --local-attention (128) --global-every (3) --rope-theta
(the global base) --local-rope-theta (10000) --bias (attention, MLP, norm and classifier biases; default none),
intermediate 3*width/2, eps 1e-5; st: --max-seq-length (48) --pooling mean|cls|max|lasttoken|weightedmean --include-prompt
1|0 --normalize --prompts ({"query": "query: ", "passage": "passage: "}) --lower-case; pylate: --dim (16)
--query-length (32) --document-length (48); st and pylate: --base bert|distilbert|roberta|modernbert (the encoder they wrap, with
the options of that kind). The vocabulary is TOKDIR's (tokenizer.json or vocab.txt for BERT,
vocab.json + merges.txt for GPT-2), saved beside the weights. Weights: every parameter redrawn N(0, 0.2),
LayerNorm weights 1 + N(0, 0.2), after construction, so that a wrong bias or LayerNorm shows in the outputs.
st and pylate folders hold BERT's LayerNorms as LayerNorm.gamma / .beta (their base model went through
from_pretrained, and 5.3's save_pretrained reverts its "legacy" gamma -> weight renaming); bert, bert-mlm and gpt2
folders, saved from the freshly built model, hold .weight / .bias. Tied weights (BertForMaskedLM's decoder and
decoder.bias, GPT-2's lm_head) are not in the files.

TEXTS_FILE etc.: UTF-8, split on "\\n" (a final empty piece is no line). Outputs (floats exactly as float32):
  hidden     {"model", "architecture", "texts": [{"text", "ids", "hidden": [embeddings, layer 1, ...][T][width],
             and for MLM / LM heads "logits_head" [T][64] (vocabulary ids 0..63), "argmax" [T], "logsumexp" [T]}]}
             one text at a time, the tokenizer's defaults (BERT: [CLS] .. [SEP]; GPT-2: nothing added), truncated
             to max_position; eager attention, float32. --batch: all texts in one batch padded on the right
             (the tokenizer's padding), each text's valid rows kept.
  st-encode  {"model", "prompt_name", "dim", "ids": [[...]] (model.tokenize of prompt + text, one at a time),
             "embeddings": [[...]]} from SentenceTransformer.encode.
  generate   {"model", "results": [{"prompt", "prompt_ids", "new_ids"}]}: greedy, stops early at <|endoftext|>.
  pylate     {"model", "queries"/"docs": [{"text", "ids" (fed, prefix and [MASK] expansion included),
             "attention_mask", "kept" (tokens whose vectors encode returns: docs drop the skiplist), "vectors"}],
             "scores": [query][doc] MaxSim (pylate.scores.colbert_scores of one pair at a time, so no padding),
             "vocab" (len(tokenizer)), "prefix_ids" ([Q], [D]), "added_rows" (embedding rows past config.json's
             vocab_size: those PyLate added for its prefixes)}. --head-from EXPORT_DIR: MODEL_DIR is a plain
             encoder folder, made a ColBERT by PyLate (its prefixes added, --query-length, --document-length),
             whose random head is replaced by EXPORT_DIR's 1_Dense and whose added rows, once reported, are set to the
             mean they were drawn around.
  pylate-loss {"model", "in_batch": pylate.losses.Contrastive of the queries against their documents (line i's
             document is query i's positive, the others its in-batch negatives), "with_negatives": the same with
             NEGATIVES_FILE's line i as query i's hard negative, "grad_norm": the global norm of its gradient,
             "head_grad": the head's ([out][in]), "embedding_grad_norm": the word embeddings'}, all lines one batch,
             eval mode (no dropout).
  choices    {"model", "items": [{"loglik": [..], "tokens": [..]} per ending], "acc", "acc_norm"}: each ending's
             log-likelihood after its context as lm-evaluation-harness computes it for a causal model (trailing
             spaces of the context moved to the ending; the ending's tokens = encode(context + ending) past
             encode(context); no special tokens; the last max_position + 1 tokens; one pair at a time, float32);
             acc = argmax of the sums, acc_norm = argmax of the sums over the endings' lengths in characters.
  st-loss    {"model", "mnrl", "mnrl_negatives", "cached", "cached_negatives"}: sentence_transformers.losses'
             MultipleNegativesRankingLoss (scale 20) and CachedMultipleNegativesRankingLoss (scale 20,
             mini_batch_size 2) of the anchors against their positives (in-batch), and with NEGATIVES_FILE's line
             i as anchor i's hard negative; all lines one batch, eval mode.
"""
import argparse
import glob
import json
import os
import shlex
import sys
import tempfile

DTYPES = ("float32", "float16", "bfloat16")


def read_lines(path):
    with open(path, "rb") as f:
        lines = f.read().decode("utf-8").split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False)


def load_tokenizer(kind, tokdir):
    """What from_pretrained gives for the folder (5.3's constructors ignore vocab_file; BertTokenizerFast is
    BertTokenizer there, and it prefers tokenizer.json to vocab.txt)."""
    from transformers import BertTokenizerFast, GPT2TokenizerFast
    return (GPT2TokenizerFast if kind in ("gpt2", "llama") else BertTokenizerFast).from_pretrained(tokdir)


def save_tokenizer(tok, out_dir):
    tok.save_pretrained(out_dir)
    write_special_tokens_map(tok, out_dir)


def write_special_tokens_map(tok, out_dir):
    """transformers 5.3 writes only tokenizer.json and tokenizer_config.json; hub folders (saved by 4.x) also
    hold special_tokens_map.json, which 5.3 still reads, so it is written as 4.x did."""
    with open(os.path.join(out_dir, "special_tokens_map.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(tok.special_tokens_map, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def randomise(model, seed):
    import torch
    torch.manual_seed(seed)
    with torch.no_grad():
        norms = {id(m.weight) for m in model.modules()
                 if isinstance(m, torch.nn.LayerNorm) or type(m).__name__.endswith("RMSNorm")}
        for _, p in model.named_parameters():  # tied parameters come once
            p.copy_(torch.randn_like(p) * 0.2 + (1.0 if id(p) in norms else 0.0))


def build_hf(kind, tok, a):
    import torch
    from transformers import (BertConfig, BertForMaskedLM, BertModel, DistilBertConfig, DistilBertForMaskedLM,
                              DistilBertModel, GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM,
                              MegatronBertConfig, MegatronBertModel, ModernBertConfig, ModernBertForMaskedLM,
                              ModernBertModel, RobertaConfig, RobertaForMaskedLM, RobertaModel)
    torch.manual_seed(a.seed)
    if kind in ("modernbert", "modernbert-mlm"):
        cfg = ModernBertConfig(vocab_size=len(tok) + a.pad_vocab, hidden_size=a.width, num_hidden_layers=a.layers,
                               num_attention_heads=a.heads, intermediate_size=a.intermediate or 3 * a.width // 2,
                               max_position_embeddings=a.max_position, norm_eps=1e-5 if a.eps is None else a.eps,
                               hidden_activation=a.act or "gelu", classifier_activation=a.act or "gelu",
                               local_attention=a.local_attention, global_attn_every_n_layers=a.global_every,
                               global_rope_theta=a.rope_theta, local_rope_theta=a.local_rope_theta,
                               attention_bias=a.bias, mlp_bias=a.bias, norm_bias=a.bias, classifier_bias=a.bias,
                               pad_token_id=tok.pad_token_id, cls_token_id=tok.cls_token_id,
                               sep_token_id=tok.sep_token_id, bos_token_id=tok.cls_token_id,
                               eos_token_id=tok.sep_token_id)
        model = (ModernBertForMaskedLM if kind == "modernbert-mlm" else ModernBertModel)(cfg)
    elif kind in ("distilbert", "distilbert-mlm"):
        cfg = DistilBertConfig(vocab_size=len(tok) + a.pad_vocab, dim=a.width, n_layers=a.layers, n_heads=a.heads,
                               hidden_dim=a.intermediate or 4 * a.width, max_position_embeddings=a.max_position,
                               activation=a.act or "gelu", pad_token_id=tok.pad_token_id)
        model = (DistilBertForMaskedLM if kind == "distilbert-mlm" else DistilBertModel)(cfg)
    elif kind in ("roberta", "roberta-mlm"):
        # pad_token_id 1 as RoBERTa's own vocabulary has it: positions start at 2 (the tokenizer's padding, id 0
        # here, is masked anyway), and max_position_embeddings counts the two unused rows, as roberta-base's 514.
        cfg = RobertaConfig(vocab_size=len(tok) + a.pad_vocab, hidden_size=a.width, num_hidden_layers=a.layers,
                            num_attention_heads=a.heads, intermediate_size=a.intermediate or 4 * a.width,
                            hidden_act=a.act or "gelu", layer_norm_eps=1e-5 if a.eps is None else a.eps,
                            max_position_embeddings=a.max_position + 2, type_vocab_size=1, pad_token_id=1)
        model = (RobertaForMaskedLM if kind == "roberta-mlm" else RobertaModel)(cfg)
    elif kind == "llama":
        cfg = LlamaConfig(vocab_size=len(tok) + a.pad_vocab, hidden_size=a.width, num_hidden_layers=a.layers,
                          num_attention_heads=a.heads, num_key_value_heads=a.kv_heads or a.heads,
                          intermediate_size=a.intermediate or 3 * a.width, max_position_embeddings=a.max_position,
                          rms_norm_eps=1e-6 if a.eps is None else a.eps, rope_theta=a.rope_theta,
                          tie_word_embeddings=a.tie, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
        model = LlamaForCausalLM(cfg)
    elif kind == "gpt2":
        cfg = GPT2Config(vocab_size=len(tok) + a.pad_vocab, n_embd=a.width, n_layer=a.layers, n_head=a.heads,
                         n_positions=a.max_position, n_inner=a.intermediate, activation_function=a.act or "gelu_new",
                         layer_norm_epsilon=1e-5 if a.eps is None else a.eps,
                         bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
        model = GPT2LMHeadModel(cfg)
    else:
        config_class = MegatronBertConfig if kind == "megatron-bert" else BertConfig
        cfg = config_class(vocab_size=len(tok) + a.pad_vocab, hidden_size=a.width, num_hidden_layers=a.layers,
                           num_attention_heads=a.heads, intermediate_size=a.intermediate or 4 * a.width,
                           hidden_act=a.act or "gelu", layer_norm_eps=1e-12 if a.eps is None else a.eps,
                           max_position_embeddings=a.max_position, type_vocab_size=a.type_vocab,
                           pad_token_id=tok.pad_token_id)
        model = {"bert-mlm": BertForMaskedLM, "megatron-bert": MegatronBertModel}.get(kind, BertModel)(cfg)
    randomise(model, a.seed)
    return model.to(getattr(torch, a.dtype)).eval()


def save_hf(model, out_dir, a):
    state = None
    if a.prefix:  # BertModel's own base_model_prefix, which from_pretrained strips again
        state = {"bert." + k: v for k, v in model.state_dict().items()}
    model.save_pretrained(out_dir, state_dict=state)
    if a.shards > 1:
        size = shard_size(out_dir, a.shards)
        os.remove(os.path.join(out_dir, "model.safetensors"))
        model.save_pretrained(out_dir, state_dict=state, max_shard_size=size)
    if a.no_safetensors:
        to_bin(out_dir)


def shard_size(out_dir, n):
    """The largest max_shard_size (bytes) for which transformers' splitter (huggingface_hub's) gives >= n shards
    of what the unsharded save held (tied weights already dropped)."""
    from huggingface_hub import split_torch_state_dict_into_shards
    from safetensors.torch import load_file
    state = load_file(os.path.join(out_dir, "model.safetensors"))

    def count(size):
        return len(split_torch_state_dict_into_shards(state, max_shard_size=size).filename_to_tensors)
    lo, hi = 1, sum(t.numel() * t.element_size() for t in state.values())
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if count(mid) >= n else (lo, mid - 1)
    return lo


def to_bin(out_dir):
    import torch
    from safetensors.torch import load_file
    for path in glob.glob(os.path.join(out_dir, "model*.safetensors")):
        name = os.path.basename(path).replace("model", "pytorch_model", 1).replace(".safetensors", ".bin")
        torch.save(load_file(path), os.path.join(out_dir, name))
        os.remove(path)
    index = os.path.join(out_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            data = json.load(f)
        data["weight_map"] = {k: v.replace("model", "pytorch_model", 1).replace(".safetensors", ".bin")
                              for k, v in data["weight_map"].items()}
        write_json(os.path.join(out_dir, "pytorch_model.bin.index.json"), data)
        os.remove(index)


def make(a):
    kind, out_dir = a.kind, a.out_dir
    if kind in ("st", "pylate") and (a.shards > 1 or a.no_safetensors or a.prefix):
        raise SystemExit(f"make {kind}: --shards, --no-safetensors and --prefix are for bert, bert-mlm and gpt2")
    if a.prefix and kind != "bert":
        raise SystemExit("make: --prefix is for bert")
    os.makedirs(out_dir, exist_ok=True)
    tok = load_tokenizer(kind, a.tokenizer)
    if kind in ("bert", "bert-mlm", "megatron-bert", "distilbert", "distilbert-mlm", "roberta", "roberta-mlm", "gpt2",
                "llama", "modernbert", "modernbert-mlm"):
        save_hf(build_hf(kind, tok, a), out_dir, a)
        save_tokenizer(tok, out_dir)
    else:
        with tempfile.TemporaryDirectory() as base:  # the encoder folder both wrap, as a user's base model
            save_hf(build_hf(a.base, tok, a), base, a)
            save_tokenizer(tok, base)
            (make_st if kind == "st" else make_pylate)(base, out_dir, a)
    print(f"{out_dir}: {kind} model: {' '.join(sorted(os.listdir(out_dir)))}")


def make_st(base, out_dir, a):
    from sentence_transformers import SentenceTransformer, models
    transformer = models.Transformer(base, max_seq_length=a.max_seq_length, do_lower_case=a.lower_case)
    modules = [transformer, models.Pooling(a.width, pooling_mode=a.pooling, include_prompt=bool(a.include_prompt))]
    if a.normalize:
        modules.append(models.Normalize())
    prompts = {"query": "query: ", "passage": "passage: "} if a.prompts else None
    model = SentenceTransformer(modules=modules, prompts=prompts, device="cpu")
    model.save(out_dir)
    write_special_tokens_map(model.tokenizer, out_dir)


def make_pylate(base, out_dir, a):
    from pylate import models
    model = models.ColBERT(base, device="cpu", embedding_size=a.dim, query_length=a.query_length,
                           document_length=a.document_length)
    # ColBERT added "[Q] " and "[D] " to the vocabulary (embedding rows drawn by resize_token_embeddings) and a
    # Dense with nn.Linear's init: redraw everything so those are seeded like the rest.
    randomise(model, a.seed)
    model.save(out_dir)
    write_special_tokens_map(model.tokenizer, out_dir)  # pad_token is [MASK] now: PyLate pads queries with it


def load_hf(model_dir):
    import torch
    from transformers import AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM
    with open(os.path.join(model_dir, "config.json")) as f:
        arch = (json.load(f).get("architectures") or ["?"])[0]
    cls = {"GPT2LMHeadModel": AutoModelForCausalLM, "LlamaForCausalLM": AutoModelForCausalLM,
           "BertForMaskedLM": AutoModelForMaskedLM, "ModernBertForMaskedLM": AutoModelForMaskedLM,
           "DistilBertForMaskedLM": AutoModelForMaskedLM, "RobertaForMaskedLM": AutoModelForMaskedLM}.get(arch, AutoModel)
    model, info = cls.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager",
                                      output_loading_info=True)
    if info["missing_keys"] or info["unexpected_keys"]:  # randomly initialised weights would judge nothing
        raise SystemExit(f"{model_dir}: missing {sorted(info['missing_keys'])} unexpected "
                         f"{sorted(info['unexpected_keys'])}")
    return model.eval(), arch


def without_unused_inputs(enc, arch):
    """DistilBERT has no token types; its forward refuses the BERT tokenizer's token_type_ids."""
    if arch.startswith("DistilBert"):
        enc.pop("token_type_ids", None)
    return enc


def hidden(a):
    import torch
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(a.model_dir)
    model, arch = load_hf(a.model_dir)
    max_len = getattr(model.config, "max_position_embeddings", None) or model.config.n_positions
    texts = []
    lines = read_lines(a.texts_file)
    if a.batch:  # all texts in one batch, padded on the right; each text's valid rows are kept
        if tok.pad_token is None:  # GPT-2's vocabulary has none; the padded ids are masked anyway
            tok.pad_token = tok.eos_token
        batch = without_unused_inputs(tok(lines, truncation=True, max_length=max_len, padding=True,
                                          return_tensors="pt"), arch)
        with torch.no_grad():
            batch_out = model(**batch, output_hidden_states=True)
    for row, text in enumerate(lines):
        if a.batch:
            n = int(batch["attention_mask"][row].sum())
            enc = {"input_ids": batch["input_ids"][row:row + 1, :n]}
            out = type("Rows", (), {"hidden_states": [h[row:row + 1, :n] for h in batch_out.hidden_states],
                                    "logits": getattr(batch_out, "logits", None)})()
            if out.logits is not None:
                out.logits = out.logits[row:row + 1, :n]
        else:
            enc = without_unused_inputs(tok(text, truncation=True, max_length=max_len, return_tensors="pt"), arch)
            with torch.no_grad():
                out = model(**enc, output_hidden_states=True)
        item = {"text": text, "ids": enc["input_ids"][0].tolist(),
                "hidden": [h[0].float().tolist() for h in out.hidden_states]}
        if getattr(out, "logits", None) is not None:
            logits = out.logits[0].float()
            item.update(logits_head=logits[:, :64].tolist(), argmax=logits.argmax(-1).tolist(),
                        logsumexp=torch.logsumexp(logits, -1).tolist())
        texts.append(item)
    write_json(a.out_json, {"model": a.model_dir, "architecture": arch, "batch": a.batch, "texts": texts})


def choices(a):
    import torch
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(a.model_dir)
    model, _ = load_hf(a.model_dir)
    max_len = getattr(model.config, "max_position_embeddings", None) or model.config.n_positions
    items, hits, hits_norm = [], 0, 0
    with open(a.choices_jsonl, encoding="utf-8") as f:
        lines = [json.loads(line) for line in f if line.strip()]
    for item in lines:
        logliks, counts = [], []
        for ending in item["endings"]:
            context = item["context"]
            spaces = len(context) - len(context.rstrip())
            if spaces:
                ending, context = context[-spaces:] + ending, context[:-spaces]
            context_ids = tok(context, add_special_tokens=False)["input_ids"]
            whole = tok(context + ending, add_special_tokens=False)["input_ids"]
            ending_ids = whole[len(context_ids):]
            seq = (context_ids + ending_ids)[-(max_len + 1):]
            inp = torch.tensor([seq[:-1]])
            with torch.no_grad():
                logp = torch.log_softmax(model(input_ids=inp).logits[0].float(), -1)
            n = len(ending_ids)
            targets = torch.tensor(seq[-n:])
            logliks.append(float(logp[-n:].gather(1, targets[:, None]).sum()))
            counts.append(n)
        norm = [ll / len(e) for ll, e in zip(logliks, item["endings"])]
        hits += int(max(range(len(logliks)), key=logliks.__getitem__) == item["label"])
        hits_norm += int(max(range(len(norm)), key=norm.__getitem__) == item["label"])
        items.append({"loglik": logliks, "tokens": counts})
    write_json(a.out_json, {"model": a.model_dir, "items": items, "acc": hits / len(lines),
                            "acc_norm": hits_norm / len(lines)})


def st_encode(a):
    import torch
    from sentence_transformers import SentenceTransformer
    # float32 whatever dtype the folder was saved in (5.3 loads "auto": the saved dtype), as spread computes.
    model = SentenceTransformer(a.model_dir, device="cpu", model_kwargs={"dtype": torch.float32})
    texts = read_lines(a.texts_file)
    emb = model.encode(texts, batch_size=a.batch_size, prompt_name=a.prompt_name, convert_to_numpy=True)
    prompt = model.prompts[a.prompt_name] if a.prompt_name else model.prompts.get(model.default_prompt_name)
    ids = [model.tokenize([(prompt or "") + t])["input_ids"][0].tolist() for t in texts]
    write_json(a.out_json, {"model": a.model_dir, "prompt_name": a.prompt_name, "dim": int(emb.shape[1]),
                            "ids": ids, "embeddings": emb.astype("float32").tolist()})


def generate(a):
    import torch
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(a.model_dir)
    model, _ = load_hf(a.model_dir)
    results = []
    for prompt in read_lines(a.prompts_file):
        ids = tok(prompt, return_tensors="pt")["input_ids"]
        positions = getattr(model.config, "n_positions", None) or model.config.max_position_embeddings
        if ids.shape[1] + a.max_new_tokens > positions:
            raise SystemExit(f"generate: {ids.shape[1]} prompt tokens + {a.max_new_tokens} > {positions} positions")
        with torch.no_grad():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=a.max_new_tokens,
                                 do_sample=False, pad_token_id=tok.eos_token_id)
        results.append({"prompt": prompt, "prompt_ids": ids[0].tolist(), "new_ids": out[0, ids.shape[1]:].tolist()})
    write_json(a.out_json, {"model": a.model_dir, "results": results})


def pylate(a):
    import torch
    from pylate import models, scores
    if a.head_from is None:
        model = models.ColBERT(a.model_dir, device="cpu")
    else:  # a ColBERT made from an encoder folder, with the head of a spread run's export in place of its random one
        from safetensors.torch import load_file
        head = load_file(os.path.join(a.head_from, "1_Dense", "model.safetensors"))["linear.weight"]
        model = models.ColBERT(a.model_dir, device="cpu", embedding_size=head.shape[0],
                               query_length=a.query_length, document_length=a.document_length)
        with torch.no_grad():
            model[1].linear.weight.copy_(head)
    with open(os.path.join(a.model_dir, "config.json")) as f:
        folder_rows = json.load(f)["vocab_size"]
    rows = model[0].auto_model.get_input_embeddings().weight.detach().clone()
    if a.head_from is not None and len(rows) > folder_rows:
        # resize_token_embeddings drew the new rows around the old rows' mean with 1e-9 of their covariance; the
        # draw is reported (added_rows), and the encodings below are of the mean itself, the draw's expectation.
        with torch.no_grad():
            model[0].auto_model.get_input_embeddings().weight[folder_rows:] = rows[:folder_rows].mean(0)

    def encode(texts, is_query):
        items = []
        for text in texts:  # one at a time: no batch padding in the ids
            out = model.encode([text], is_query=is_query, output_value=None)
            mask = out["masks"][0].astype(bool)
            items.append({"text": text, "ids": out["input_ids"][0].tolist(),
                          "attention_mask": out["attention_mask"][0].tolist(), "kept": mask.astype(int).tolist(),
                          "vectors": out["token_embeddings"][0][mask]})
        return items
    queries, docs = encode(read_lines(a.queries_file), True), encode(read_lines(a.docs_file), False)
    table = [[float(scores.colbert_scores(q["vectors"][None], d["vectors"][None])[0, 0]) for d in docs]
             for q in queries]
    for item in queries + docs:
        item["vectors"] = item["vectors"].tolist()
    write_json(a.out_json, {"model": a.model_dir, "queries": queries, "docs": docs, "scores": table,
                            "vocab": len(model.tokenizer), "prefix_ids": [model.query_prefix_id,
                                                                          model.document_prefix_id],
                            "added_rows": rows[folder_rows:].tolist()})


def pylate_loss(a):
    import torch
    from pylate import losses, models
    model = models.ColBERT(a.model_dir, device="cpu").eval()
    loss = losses.Contrastive(model=model)
    queries = model.tokenize(read_lines(a.queries_file), is_query=True)
    positive_texts = read_lines(a.docs_file)
    # The loss stacks positives and negatives, so they are padded together, as PyLate's collator does.
    both = model.tokenize(positive_texts + read_lines(a.negatives_file), is_query=False)
    n = len(positive_texts)
    docs, negatives = ({k: v[:n] for k, v in both.items()}, {k: v[n:] for k, v in both.items()})
    with torch.no_grad():
        in_batch = float(loss([queries, docs]))
    # The gradient a training step would take from the batch with hard negatives.
    with_negatives = loss([queries, docs, negatives])
    with_negatives.backward()
    grads = [q.grad for q in model.parameters() if q.grad is not None]
    write_json(a.out_json, {"model": a.model_dir, "in_batch": in_batch, "with_negatives": float(with_negatives),
                            "grad_norm": float(torch.linalg.vector_norm(torch.cat([g.flatten() for g in grads]))),
                            "head_grad": model[1].linear.weight.grad.tolist(),
                            "embedding_grad_norm": float(model[0].auto_model.get_input_embeddings().weight.grad
                                                         .norm())})


def st_loss(a):
    import torch
    from sentence_transformers import SentenceTransformer, losses
    model = SentenceTransformer(a.model_dir, device="cpu", model_kwargs={"dtype": torch.float32}).eval()
    features = [model.tokenize(read_lines(f)) for f in (a.anchors_file, a.positives_file, a.negatives_file)]
    labels = torch.zeros(len(read_lines(a.anchors_file)))  # not read by either loss
    out = {"model": a.model_dir}
    for name, loss in (("mnrl", losses.MultipleNegativesRankingLoss(model, scale=20.0)),
                       ("cached", losses.CachedMultipleNegativesRankingLoss(model, scale=20.0, mini_batch_size=2))):
        with torch.no_grad() if name == "mnrl" else torch.enable_grad():  # the cached loss backpropagates itself
            out[name] = float(loss(features[:2], labels).detach())
            out[name + "_negatives"] = float(loss(features, labels).detach())
    write_json(a.out_json, out)


def parser():
    p = argparse.ArgumentParser(prog="hf_model_ref.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("kind", choices=("bert", "bert-mlm", "megatron-bert", "distilbert", "distilbert-mlm", "roberta",
                                    "roberta-mlm", "gpt2", "llama", "modernbert", "modernbert-mlm", "st", "pylate"))
    m.add_argument("out_dir")
    m.add_argument("--tokenizer", required=True)
    for name, default in (("seed", 0), ("layers", 2), ("heads", 2), ("width", 32), ("intermediate", None),
                          ("max-position", 64), ("type-vocab", 2), ("shards", 1), ("max-seq-length", 48),
                          ("include-prompt", 1), ("dim", 16), ("query-length", 32), ("document-length", 48),
                          ("pad-vocab", 0), ("kv-heads", 0), ("local-attention", 128), ("global-every", 3)):
        m.add_argument("--" + name, type=int, default=default)
    m.add_argument("--eps", type=float)
    m.add_argument("--rope-theta", type=float, default=10000.0)
    m.add_argument("--local-rope-theta", type=float, default=10000.0)
    m.add_argument("--act")
    m.add_argument("--base", choices=("bert", "distilbert", "roberta", "modernbert"), default="bert")
    m.add_argument("--dtype", choices=DTYPES, default="float32")
    m.add_argument("--pooling", choices=("mean", "cls", "max", "lasttoken", "weightedmean"), default="mean")
    for flag in ("prefix", "no-safetensors", "normalize", "prompts", "lower-case", "tie", "bias"):
        m.add_argument("--" + flag, action="store_true")
    m.set_defaults(run=make)
    h = sub.add_parser("hidden")
    for name in ("model_dir", "texts_file", "out_json"):
        h.add_argument(name)
    h.add_argument("--batch", action="store_true")
    h.set_defaults(run=hidden)
    c = sub.add_parser("choices")
    for name in ("model_dir", "choices_jsonl", "out_json"):
        c.add_argument(name)
    c.set_defaults(run=choices)
    s = sub.add_parser("st-encode")
    for name in ("model_dir", "texts_file", "out_json"):
        s.add_argument(name)
    s.add_argument("--prompt-name")
    s.add_argument("--batch-size", type=int, default=32)
    s.set_defaults(run=st_encode)
    g = sub.add_parser("generate")
    for name in ("model_dir", "prompts_file", "out_json"):
        g.add_argument(name)
    g.add_argument("--max-new-tokens", type=int, default=32)
    g.set_defaults(run=generate)
    c = sub.add_parser("pylate")
    for name in ("model_dir", "queries_file", "docs_file", "out_json"):
        c.add_argument(name)
    c.add_argument("--head-from")
    c.add_argument("--query-length", type=int)
    c.add_argument("--document-length", type=int)
    c.set_defaults(run=pylate)
    c = sub.add_parser("pylate-loss")
    for name in ("model_dir", "queries_file", "docs_file", "negatives_file", "out_json"):
        c.add_argument(name)
    c.set_defaults(run=pylate_loss)
    c = sub.add_parser("st-loss")
    for name in ("model_dir", "anchors_file", "positives_file", "negatives_file", "out_json"):
        c.add_argument(name)
    c.set_defaults(run=st_loss)
    return p


def main():
    # Everything is local: no hub look-ups, and no progress bars in the callers' logs.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    from transformers.utils import logging
    logging.disable_progress_bar()
    argv = sys.argv[1:]
    if len(argv) == 2 and argv[0] == "--jobs":
        with open(argv[1], encoding="utf-8") as f:
            jobs = [shlex.split(line) for line in f.read().split("\n") if line.strip()]
    else:
        jobs = [argv]
    for job in jobs:
        args = parser().parse_args(job)
        args.run(args)


if __name__ == "__main__":
    main()
