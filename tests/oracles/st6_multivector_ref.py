"""sentence-transformers 6's late-interaction folders (MultiVectorEncoder), for tests/test_st6_folders.cpp; run with
the peers environment (scripts/python_env.sh --peers).

    st6_multivector_ref.py make OUT_DIR --tokenizer BERT_TOKENIZER_DIR [--seed N] [--attend 0|1]
    st6_multivector_ref.py encode MODEL_DIR QUERIES.txt DOCS.txt OUT.json

make: a tiny random BERT with the tokenizer's vocabulary, wrapped as bench/bench_colbert_peer.py's st6 path wraps a
base model (Transformer with document_length and fixed [MASK] query expansion, a token-level Dense without bias,
MultiVectorMask with the punctuation skiplist, Normalize; prompts "[Q] " and "[D] " registered as unnormalised
special tokens), every weight redrawn from the seed, saved with model.save.
encode: MultiVectorEncoder(MODEL_DIR).encode_query / encode_document, as pylate_reference.h reads it: per text the
ids the library feeds the encoder, which positions' vectors encode returns (kept), those vectors, and MaxSim scores.
"""
import argparse
import json
import string
import sys
import tempfile

MARKERS = {"query": "[Q] ", "document": "[D] "}


def make(a):
    import torch
    from sentence_transformers import MultiVectorEncoder
    from sentence_transformers.base.modules import Dense, Normalize, Transformer
    from sentence_transformers.multi_vector_encoder.modules import MultiVectorMask
    from transformers import AddedToken, BertConfig, BertModel, BertTokenizerFast

    tok = BertTokenizerFast.from_pretrained(a.tokenizer)
    tok.add_special_tokens({"additional_special_tokens": [
        AddedToken(m, normalized=False, special=True) for m in MARKERS.values()]})
    cfg = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=64, pad_token_id=tok.pad_token_id)
    with tempfile.TemporaryDirectory() as base:
        BertModel(cfg).save_pretrained(base)
        tok.save_pretrained(base)
        transformer = Transformer(base, document_length=a.document_length, query_expansion={
            "strategy": "fixed", "attend": bool(a.attend), "length": a.query_length})
    head = Dense(in_features=32, out_features=16, bias=False, activation_function=torch.nn.Identity(),
                 module_input_name="token_embeddings")
    modules = [transformer, head, MultiVectorMask(skiplist_words=list(string.punctuation)),
               Normalize(module_input_name="token_embeddings")]
    model = MultiVectorEncoder(modules=modules, device="cpu", prompts=dict(MARKERS), similarity_fn_name="maxsim")
    torch.manual_seed(a.seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.randn_like(p) * 0.2 + (1.0 if "LayerNorm.weight" in name else 0.0))
    model.save(a.out_dir)


def fed_ids(model, texts, task):
    """The ids the encoder is fed, as encode_query / encode_document prepare them (the prompt prepended as text)."""
    features = model.preprocess(texts, prompt=model.prompts[task], task=task)
    return features["input_ids"]


def encode(a):
    import torch
    from sentence_transformers import MultiVectorEncoder
    model = MultiVectorEncoder(a.model_dir, device="cpu")
    out = {}
    vectors = {}
    for key, path, task in (("queries", a.queries, "query"), ("docs", a.docs, "document")):
        with open(path, encoding="utf-8") as f:
            texts = [line.rstrip("\n") for line in f if line.strip()]
        fn = model.encode_query if task == "query" else model.encode_document
        vectors[key] = [e.float() for e in fn(texts, batch_size=64)]
        rows = []
        for text, v in zip(texts, vectors[key]):
            ids = fed_ids(model, [text], task)[0]  # one text: no batch padding beyond its own
            with torch.no_grad():
                feats = model.preprocess([text], prompt=model.prompts[task], task=task)
                feats = model.forward(feats, task=task)
            kept = feats["attention_mask"][0].bool()
            if int(kept.sum()) != v.shape[0]:
                raise SystemExit(f"{text!r}: the mask keeps {int(kept.sum())} tokens, encode returned {v.shape[0]}")
            rows.append({"text": text, "ids": ids.tolist(), "kept": kept.long().tolist(), "vectors": v.tolist()})
        out[key] = rows
    out["scores"] = [[float((q @ d.T).max(dim=1).values.sum()) for d in vectors["docs"]] for q in vectors["queries"]]
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(out, f)


def main():
    p = argparse.ArgumentParser(prog="st6_multivector_ref.py")
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("out_dir")
    m.add_argument("--tokenizer", required=True)
    m.add_argument("--seed", type=int, default=41)
    m.add_argument("--attend", type=int, choices=(0, 1), default=0)
    m.add_argument("--query-length", type=int, default=12)
    m.add_argument("--document-length", type=int, default=20)
    e = sub.add_parser("encode")
    for name in ("model_dir", "queries", "docs", "out"):
        e.add_argument(name)
    a = p.parse_args()
    (make if a.command == "make" else encode)(a)


if __name__ == "__main__":
    sys.exit(main())
