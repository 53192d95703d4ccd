"""The peers of bench/bench_colbert.sh: the same ColBERT training job done by PyLate 1.6 and by sentence-transformers
6.3's MultiVectorEncoder, each as its documentation does it, from loading the folder to saving the result; and the
helpers the benchmark needs around them (a PyLate-form copy of a sentence-transformers 6 folder for the libraries'
scorer, the check that the copy encodes as the original does, the libraries' own scorer, and Ward pooling timings).

Training (the default command):

    bench_colbert_peer.py --system pylate|st6 --pooling-aware 0|1 --model DIR --pairs MINED.jsonl --out DIR
                          [--steps 104] [--batch 16] [--lr 3e-5] [--warmup-steps 10] [--weight-decay 0.01]
                          [--seed 1] [--threads 2] [--query-length 32] [--document-length 180] [--pool-factor 4]

  pylate  (the pinned environment, .venv): pylate.models.ColBERT(DIR) on the sentence-transformers folder (a fresh
          384 -> 128 head without bias, "[Q] " / "[D] " added to the tokenizer and the embedding table resized,
          queries [MASK]-expanded to --query-length, documents cut to --document-length, punctuation skipped in
          documents: PyLate's defaults, the lengths passed explicitly), pylate.losses.Contrastive (temperature 1),
          pylate.utils.ColBERTCollator(model.tokenize), sentence-transformers 5.3's SentenceTransformerTrainer;
          model.save(OUT) writes a PyLate folder. --pooling-aware 1 is refused: PyLate 1.6 has no such loss.
  st6     (.venv-peers): MultiVectorEncoder(modules=[Transformer(DIR, document_length, query_expansion={"strategy":
          "fixed", "attend": False, "length": --query-length}), Dense(384, 128, bias=False, Identity, on
          token_embeddings), MultiVectorMask(skiplist_words=string.punctuation), Normalize(token_embeddings)],
          prompts {"query": "[Q] ", "document": "[D] "}), the markers added to the tokenizer as PyLate adds them (ids
          30522 and 30523; registered as sentence-transformers 6 registers a PyLate folder's prefixes, whole,
          unnormalised) with the embedding table resized as PyLate resizes it, the training prompts {"anchor":
          "[Q] ", "positive" and "negative_*": "[D] "} (MultiVectorEncoderTrainingArguments.prompts: the trainer
          prepends prompts by column), MultiVectorMultipleNegativesRankingLoss (scale 1 = temperature 1),
          MultiVectorEncoderTrainer; --pooling-aware 1 wraps the loss in MultiVectorTokenPoolingLoss(token_poolings=
          [None, HierarchicalTokenPooling(pool_factor=--pool-factor)]) (weights 1 and 1, one protected token, the
          library's straight-through gradient and its defaults). model.save(OUT) writes the library's own folder.

Both: the seed is set (transformers.set_seed) before the model is built, so it decides the fresh head and the new
embedding rows too; batches of --batch (anchor, positive, negative_1...) rows in file order of columns, without a
text twice in a batch (BatchSamplers.NO_DUPLICATES, as spread's sampler) and without a short last batch; spread's
schedule (train/schedule.h: linear warmup to lr as (step + 1) / (warmup + 1), then a cosine to 0 at the last step)
through a LambdaLR; AdamW with spread's betas (0.9, 0.95), eps 1e-8 and weight decay on the matrices only; gradient
clip 1; dropout as the folder sets it (0.1, the trainer's model.train()); float32 on the CPU; no evaluation; the last
step saved. Prints one JSON line: {"seconds": the whole job, "train_seconds", "steps", "pairs", "first_loss",
"last_loss"}.

Helpers (each prints what it did; JSON where the benchmark reads it):

    bench_colbert_peer.py to-pylate ST6_DIR OUT_DIR
        A PyLate folder of a sentence-transformers 6 MultiVectorEncoder folder, for `score` (the cross-check): refused
        unless the folder is [Transformer, Dense (no bias, Identity, token level), MultiVectorMask, Normalize] with
        fixed [MASK] expansion not attended to and a query and a document prompt that are tokens of its tokenizer;
        the encoder, tokenizer and head weights are copied as they are. Plain Python (json, shutil): runs in either
        environment.
    bench_colbert_peer.py vectors --system pylate|st6 --model DIR --beir SPLIT [--n 8] --out FILE.npz
        The token vectors of the first N queries and N documents of SPLIT, by the library's own encode.
    bench_colbert_peer.py compare A.npz B.npz
        {"max_abs_diff", "texts"}: the largest difference of two `vectors` files (exit 1 if the shapes differ).
    bench_colbert_peer.py score --model PYLATE_DIR --beir SPLIT [--qrels dev] [--pool-factors 1,2,4]
                                [--normalize-pooled 1] [--threads 2]
        The libraries' scorer (.venv), the cross-check of `spread eval`: PyLate's encode (normalised vectors),
        ColBERT.pool_embeddings_hierarchical (Ward, cosine distances, one protected token) per factor, its cluster
        means scaled to unit length (--normalize-pooled 1, the default: what spread's pooling and sentence-
        transformers 6's HierarchicalTokenPooling give; PyLate keeps the raw means), exact MaxSim over every
        document (padding masked out), pytrec_eval's ndcg_cut_10 on each query's top 1,000 (trec_eval's tie
        order), over the queries with a relevant document in qrels/NAME.tsv; documents as spread reads them
        (title + " " + text). Prints {"results": [{"pool_factor", "ndcg@10", "vectors_per_doc"}], "queries",
        "documents"}.
    bench_colbert_peer.py doc-vectors --model PYLATE_DIR --beir SPLIT [--n 500] --out DIR
        PyLate's document vectors of the first N documents, one float32 DIR/NNNNN.npy each (`spread pool --in`).
    bench_colbert_peer.py pool --system pylate|st6 --in DIR [--pool-factor 4] [--repeats 3]
        Ward pooling of those documents on one thread: PyLate's ColBERT.pool_embeddings_hierarchical or sentence-
        transformers 6's HierarchicalTokenPooling(pool_factor, normalize_embeddings=False: PyLate's output).pool,
        after one warm-up call; prints {"seconds" (the median call), "documents", "ms_per_doc", "vectors_per_doc"}.
"""
import argparse
import json
import math
import os
import shutil
import string
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "oracles"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

MARKERS = {"query": "[Q] ", "document": "[D] "}


# ---------------------------------------------------------------------------------------------------------- training
def spread_schedule(warmup, steps):
    def factor(step):
        if step < warmup:
            return (step + 1) / (warmup + 1)
        ratio = (step - warmup) / max(1, steps - warmup)
        return 0.5 * (1 + math.cos(math.pi * min(1.0, ratio)))
    return factor


def build_pylate(a):
    from pylate import losses, models, utils
    model = models.ColBERT(model_name_or_path=a.model, device="cpu", query_length=a.query_length,
                           document_length=a.document_length)
    return model, losses.Contrastive(model=model), utils.ColBERTCollator(model.tokenize), None


def build_st6(a, columns):
    import torch
    from sentence_transformers import MultiVectorEncoder
    from sentence_transformers.base.modules import Dense, Normalize, Transformer
    from sentence_transformers.multi_vector_encoder.losses import (MultiVectorMultipleNegativesRankingLoss,
                                                                   MultiVectorTokenPoolingLoss)
    from sentence_transformers.multi_vector_encoder.modules import HierarchicalTokenPooling, MultiVectorMask
    from transformers import AddedToken

    transformer = Transformer(a.model, document_length=a.document_length,
                              query_expansion={"strategy": "fixed", "attend": False, "length": a.query_length})
    # The markers as PyLate adds them (models/colbert.py: resize to len(tokenizer), add "[Q] " and "[D] ", resize
    # again, transformers' mean-initialised rows), registered whole and unnormalised as sentence-transformers 6 does
    # for a PyLate folder's prefixes (MultiVectorEncoder._register_prefix_tokens), so that the prompt text "[Q] "
    # becomes the one token PyLate inserts after [CLS].
    tokenizer = transformer.tokenizer
    transformer.model.resize_token_embeddings(len(tokenizer))
    tokenizer.add_special_tokens({"additional_special_tokens": [
        AddedToken(m, normalized=False, special=True) for m in MARKERS.values()]})
    transformer.model.resize_token_embeddings(len(tokenizer))
    width = transformer.get_embedding_dimension()
    head = Dense(in_features=width, out_features=128, bias=False, activation_function=torch.nn.Identity(),
                 module_input_name="token_embeddings")
    modules = [transformer, head, MultiVectorMask(skiplist_words=list(string.punctuation)),
               Normalize(module_input_name="token_embeddings")]
    model = MultiVectorEncoder(modules=modules, device="cpu", prompts=dict(MARKERS), similarity_fn_name="maxsim")
    ids = {task: model.preprocess([MARKERS[task] + "a claim."], prompt=None, task=task)["input_ids"][0].tolist()
           for task in MARKERS}
    want = {task: tokenizer.convert_tokens_to_ids(m) for task, m in MARKERS.items()}
    for task in MARKERS:  # [CLS] marker a claim . [SEP] (then [MASK]s for the query)
        if ids[task][:2] != [tokenizer.cls_token_id, want[task]]:
            raise SystemExit(f"bench_colbert_peer: the {task} marker did not tokenize as one token: {ids[task][:6]}")
    loss = MultiVectorMultipleNegativesRankingLoss(model)
    if a.pooling_aware:
        loss = MultiVectorTokenPoolingLoss(model, loss,
                                           token_poolings=[None, HierarchicalTokenPooling(pool_factor=a.pool_factor)])
    prompts = {c: MARKERS["query"] if i == 0 else MARKERS["document"] for i, c in enumerate(columns)}
    return model, loss, None, prompts


def train(argv):
    p = argparse.ArgumentParser(prog="bench_colbert_peer.py", description="the peers' ColBERT training job")
    p.add_argument("--system", choices=("pylate", "st6"), required=True)
    p.add_argument("--pooling-aware", type=int, choices=(0, 1), default=0)
    p.add_argument("--model", required=True)
    p.add_argument("--pairs", required=True)
    p.add_argument("--out", required=True)
    for name, kind, default in (("steps", int, 104), ("batch", int, 16), ("lr", float, 3e-5),
                                ("warmup-steps", int, 10), ("weight-decay", float, 0.01), ("seed", int, 1),
                                ("threads", int, 2), ("query-length", int, 32), ("document-length", int, 180),
                                ("pool-factor", float, 4)):
        p.add_argument("--" + name, type=kind, default=default)
    a = p.parse_args(argv)
    if a.system == "pylate" and a.pooling_aware:
        p.error("PyLate 1.6 has no pooling-aware loss (--pooling-aware 1 is for --system st6)")
    start = time.perf_counter()
    import torch
    import transformers
    from beir_io import read_jsonl
    from datasets import Dataset
    from transformers import TrainerCallback

    torch.set_num_threads(a.threads)
    transformers.set_seed(a.seed)
    rows = read_jsonl(a.pairs)
    columns = list(rows[0])
    dataset = Dataset.from_dict({c: [r[c] for r in rows] for c in columns})
    if a.system == "pylate":
        from sentence_transformers import SentenceTransformerTrainer as Trainer
        from sentence_transformers.training_args import BatchSamplers
        from sentence_transformers.training_args import SentenceTransformerTrainingArguments as Arguments
        model, loss, collator, prompts = build_pylate(a)
    else:
        from sentence_transformers import MultiVectorEncoderTrainer as Trainer
        from sentence_transformers import MultiVectorEncoderTrainingArguments as Arguments
        from sentence_transformers.base.sampler import BatchSamplers
        model, loss, collator, prompts = build_st6(a, columns)

    # spread's groups (train/optimizer.cpp): weight decay on the matrices (dim >= 2), none on norms and biases.
    params = [q for q in model.parameters() if q.requires_grad]
    groups = [{"params": [q for q in params if q.dim() >= 2], "weight_decay": a.weight_decay},
              {"params": [q for q in params if q.dim() < 2], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, spread_schedule(a.warmup_steps, a.steps))
    losses_seen = []

    class Record(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                losses_seen.append(logs["loss"])

    extra = {"prompts": prompts} if prompts else {}
    args = Arguments(output_dir=a.out + ".trainer", per_device_train_batch_size=a.batch, max_steps=a.steps,
                     seed=a.seed, data_seed=a.seed, batch_sampler=BatchSamplers.NO_DUPLICATES, logging_steps=1,
                     save_strategy="no", report_to="none", use_cpu=True, dataloader_drop_last=True,
                     max_grad_norm=1.0, disable_tqdm=True, **extra)
    kwargs = {"data_collator": collator} if collator is not None else {}
    trainer = Trainer(model=model, args=args, train_dataset=dataset, loss=loss, optimizers=(optimizer, scheduler),
                      callbacks=[Record()], **kwargs)
    trained_from = time.perf_counter()
    trainer.train()
    train_seconds = time.perf_counter() - trained_from
    model.save(a.out)
    print(json.dumps({"seconds": time.perf_counter() - start, "train_seconds": train_seconds, "steps": a.steps,
                      "pairs": len(dataset), "first_loss": losses_seen[0] if losses_seen else None,
                      "last_loss": losses_seen[-1] if losses_seen else None}))


# --------------------------------------------------------------------------------------- a PyLate-form copy for spread
def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


def to_pylate(argv):
    p = argparse.ArgumentParser(prog="bench_colbert_peer.py to-pylate")
    p.add_argument("st6_dir")
    p.add_argument("out_dir")
    a = p.parse_args(argv)
    src, out = a.st6_dir, a.out_dir

    def refuse(why):
        raise SystemExit(f"bench_colbert_peer to-pylate: {src}: {why}; no exact PyLate form")

    st_config = read_json(os.path.join(src, "config_sentence_transformers.json"))
    if st_config.get("model_type") != "MultiVectorEncoder":
        refuse(f"model_type is {st_config.get('model_type')!r}, not MultiVectorEncoder")
    if st_config.get("similarity_fn_name") not in (None, "maxsim"):
        refuse(f"similarity_fn_name is {st_config.get('similarity_fn_name')!r}, PyLate scores plain MaxSim")
    modules = read_json(os.path.join(src, "modules.json"))
    kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
    if kinds != ["Transformer", "Dense", "MultiVectorMask", "Normalize"] or modules[0]["path"] != "":
        refuse(f"modules are {kinds}, not [Transformer (in the root), Dense, MultiVectorMask, Normalize]")
    bert = read_json(os.path.join(src, "sentence_bert_config.json"))
    expansion = bert.get("query_expansion") or {}
    if (expansion.get("strategy") != "fixed" or expansion.get("attend")
            or expansion.get("token") not in (None, "[MASK]")):
        refuse(f"query_expansion is {expansion}, not fixed [MASK] expansion left out of attention (PyLate's)")
    if bert.get("do_lower_case") or bert.get("query_length") not in (None, expansion["length"]):
        refuse("the Transformer lower-cases or caps queries below their expansion")
    dense_dir = os.path.join(src, modules[1]["path"])
    dense = read_json(os.path.join(dense_dir, "config.json"))
    if (dense.get("bias") or dense.get("use_residual") or dense.get("module_input_name") != "token_embeddings"
            or dense.get("activation_function") != "torch.nn.modules.linear.Identity"):
        refuse(f"the Dense module is {dense}, not a token-level linear map without bias")
    mask = read_json(os.path.join(src, modules[2]["path"], "config.json"))
    if mask.get("skiplist_tasks", ["document"]) != ["document"] or mask.get("keep_only_token_ids"):
        refuse(f"MultiVectorMask is {mask}, PyLate skips words in documents only")
    norm = read_json(os.path.join(src, modules[3]["path"], "config.json")) if os.path.exists(
        os.path.join(src, modules[3]["path"], "config.json")) else {}
    if norm.get("module_input_name", "token_embeddings") != "token_embeddings":
        refuse(f"Normalize is {norm}, not on the token vectors")
    prompts = st_config.get("prompts") or {}
    tokenizer = read_json(os.path.join(src, "tokenizer.json"))
    added = {t["content"]: t for t in tokenizer.get("added_tokens", [])}
    for role in ("query", "document"):
        marker = prompts.get(role) or ""
        if marker not in added or added[marker].get("normalized"):
            refuse(f"the {role} prompt {marker!r} is not one unnormalised added token of its tokenizer")

    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(os.path.join(out, "1_Dense"))
    for name in os.listdir(src):
        path = os.path.join(src, name)
        if os.path.isfile(path) and name not in ("modules.json", "config_sentence_transformers.json",
                                                  "sentence_bert_config.json", "README.md"):
            shutil.copy2(path, os.path.join(out, name))
    shutil.copy2(os.path.join(dense_dir, "model.safetensors"), os.path.join(out, "1_Dense", "model.safetensors"))
    write_json(os.path.join(out, "1_Dense", "config.json"),
               {"in_features": dense["in_features"], "out_features": dense["out_features"], "bias": False,
                "activation_function": "torch.nn.modules.linear.Identity", "use_residual": False})
    write_json(os.path.join(out, "modules.json"),
               [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Dense", "type": "pylate.models.Dense.Dense"}])
    document_length = bert.get("document_length")
    if not document_length:
        refuse("its Transformer has no document_length")
    write_json(os.path.join(out, "sentence_bert_config.json"), {"max_seq_length": document_length - 1,
                                                               "do_lower_case": False})
    write_json(os.path.join(out, "config_sentence_transformers.json"), {
        "model_type": "ColBERT", "prompts": {}, "default_prompt_name": None, "similarity_fn_name": "MaxSim",
        "query_prefix": prompts["query"], "document_prefix": prompts["document"],
        "query_length": expansion["length"], "document_length": document_length,
        "attend_to_expansion_tokens": False, "skiplist_words": mask.get("skiplist_words") or [],
        "do_query_expansion": True,
        "converted_from": "sentence-transformers 6 MultiVectorEncoder (bench_colbert_peer.py)"})
    print(f"to-pylate: {out} (from {src})")


# ------------------------------------------------------------------------------------------------- checks and scoring
def split_texts(folder, qrels_name=None):
    """Queries (those with a relevant document in qrels NAME, else all) and documents as spread reads them."""
    from beir_io import qrels_path, read_jsonl
    from mine_ref import document_text
    corpus = read_jsonl(os.path.join(folder, "corpus.jsonl"))
    queries = read_jsonl(os.path.join(folder, "queries.jsonl"))
    qrels = {}
    if qrels_name:
        with open(qrels_path(folder, qrels_name), encoding="utf-8") as f:
            next(f)
            for line in f:
                query, doc, score = line.rstrip("\n").split("\t")
                qrels.setdefault(query, {})[doc] = int(float(score))
        qrels = {q: d for q, d in qrels.items() if any(s > 0 for s in d.values())}
        queries = [q for q in queries if str(q["_id"]) in qrels]
    return ([str(q["_id"]) for q in queries], [q["text"] for q in queries], [str(d["_id"]) for d in corpus],
            [document_text(d) for d in corpus], qrels)


def library_encoder(system, model_dir):
    """encode(texts, is_query) -> list of [tokens, dim] float32 tensors, by the library's own encode."""
    import torch
    if system == "pylate":
        from pylate import models
        model = models.ColBERT(model_name_or_path=model_dir, device="cpu")
        return lambda texts, is_query: [torch.as_tensor(e) for e in model.encode(
            texts, is_query=is_query, batch_size=32, show_progress_bar=False, convert_to_numpy=True)]
    from sentence_transformers import MultiVectorEncoder
    model = MultiVectorEncoder(model_dir, device="cpu")
    return lambda texts, is_query: [e.float().cpu() for e in (model.encode_query if is_query else
                                                               model.encode_document)(texts, batch_size=32)]


def vectors(argv):
    p = argparse.ArgumentParser(prog="bench_colbert_peer.py vectors")
    p.add_argument("--system", choices=("pylate", "st6"), required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--beir", required=True)
    p.add_argument("--n", type=int, default=8)
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    import numpy as np
    _, queries, _, docs, _ = split_texts(a.beir)
    encode = library_encoder(a.system, a.model)
    arrays = {}
    for kind, texts in (("q", queries[:a.n]), ("d", docs[:a.n])):
        for i, e in enumerate(encode(texts, kind == "q")):
            arrays[f"{kind}{i}"] = e.numpy().astype(np.float32)
    np.savez(a.out, **arrays)
    print(f"vectors: {len(arrays)} texts by {a.system} into {a.out}")


def compare(argv):
    import numpy as np
    first, second = (np.load(path) for path in argv)
    if sorted(first.files) != sorted(second.files):
        raise SystemExit("compare: different texts")
    worst = 0.0
    for key in first.files:
        if first[key].shape != second[key].shape:
            print(json.dumps({"max_abs_diff": None, "texts": len(first.files),
                              "shapes": [key, first[key].shape, second[key].shape]}, default=list))
            raise SystemExit(1)
        worst = max(worst, float(np.abs(first[key] - second[key]).max()))
    print(json.dumps({"max_abs_diff": worst, "texts": len(first.files)}))


def score(argv):
    p = argparse.ArgumentParser(prog="bench_colbert_peer.py score")
    p.add_argument("--model", required=True)
    p.add_argument("--beir", required=True)
    p.add_argument("--qrels", default="dev")
    p.add_argument("--pool-factors", default="1,2,4")
    p.add_argument("--normalize-pooled", type=int, choices=(0, 1), default=1)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args(argv)
    import pytrec_eval
    import torch
    from pylate import models
    torch.set_num_threads(a.threads)
    query_ids, queries, doc_ids, docs, qrels = split_texts(a.beir, a.qrels)
    model = models.ColBERT(model_name_or_path=a.model, device="cpu")
    docs_vectors = [torch.as_tensor(e) for e in model.encode(docs, is_query=False, batch_size=32,
                                                             show_progress_bar=False)]
    q = torch.stack([torch.as_tensor(e) for e in model.encode(queries, is_query=True, batch_size=32,
                                                              show_progress_bar=False)])
    results = []
    for factor in (float(f) for f in a.pool_factors.split(",")):
        pooled = docs_vectors if factor == 1 else model.pool_embeddings_hierarchical(
            docs_vectors, pool_factor=int(factor) if factor.is_integer() else factor, protected_tokens=1)
        if factor != 1 and a.normalize_pooled:  # unit cluster means, as spread and HierarchicalTokenPooling give
            pooled = [torch.nn.functional.normalize(d, dim=-1) for d in pooled]
        scores = torch.empty(len(queries), len(pooled))
        for first in range(0, len(pooled), 64):  # exact MaxSim, padding masked out
            chunk = pooled[first:first + 64]
            padded = torch.nn.utils.rnn.pad_sequence(chunk, batch_first=True)
            valid = torch.nn.utils.rnn.pad_sequence([torch.ones(len(c), dtype=torch.bool) for c in chunk],
                                                    batch_first=True)
            sim = torch.einsum("qth,dsh->qdts", q, padded).masked_fill(~valid[None, :, None, :], float("-inf"))
            scores[:, first:first + len(chunk)] = sim.max(dim=-1).values.sum(dim=-1)
        top_scores, top = torch.topk(scores, k=min(1000, len(doc_ids)), dim=1)
        run = {qid: {doc_ids[j]: float(s) for s, j in zip(top_scores[i].tolist(), top[i].tolist())}
               for i, qid in enumerate(query_ids)}
        measured = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(run)
        results.append({"pool_factor": factor,
                        "ndcg@10": sum(m["ndcg_cut_10"] for m in measured.values()) / len(measured),
                        "vectors_per_doc": sum(len(d) for d in pooled) / len(pooled)})
    print(json.dumps({"results": results, "queries": len(query_ids), "documents": len(doc_ids)}))


# ------------------------------------------------------------------------------------------------------- pooling speed
def doc_vectors(argv):
    p = argparse.ArgumentParser(prog="bench_colbert_peer.py doc-vectors")
    p.add_argument("--model", required=True)
    p.add_argument("--beir", required=True)
    p.add_argument("--n", type=int, default=500)
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    import numpy as np
    _, _, _, docs, _ = split_texts(a.beir)
    os.makedirs(a.out, exist_ok=True)
    for i, e in enumerate(library_encoder("pylate", a.model)(docs[:a.n], False)):
        np.save(os.path.join(a.out, f"{i:05d}.npy"), e.numpy().astype(np.float32))
    print(f"doc-vectors: {min(a.n, len(docs))} documents into {a.out}")


def pool(argv):
    p = argparse.ArgumentParser(prog="bench_colbert_peer.py pool")
    p.add_argument("--system", choices=("pylate", "st6"), required=True)
    p.add_argument("--in", dest="folder", required=True)
    p.add_argument("--pool-factor", type=float, default=4)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args(argv)
    os.environ["OMP_NUM_THREADS"] = "1"
    import numpy as np
    import torch
    torch.set_num_threads(1)
    names = sorted(n for n in os.listdir(a.folder) if n.endswith(".npy") and not n.endswith(".labels.npy"))
    docs = [torch.from_numpy(np.load(os.path.join(a.folder, n))) for n in names]
    if a.system == "pylate":
        from pylate.models import ColBERT
        factor = int(a.pool_factor) if a.pool_factor.is_integer() else a.pool_factor

        def call():  # the method uses no state of the model: called on the class with self = None
            return ColBERT.pool_embeddings_hierarchical(None, docs, pool_factor=factor, protected_tokens=1)
    else:
        from sentence_transformers.multi_vector_encoder.modules import HierarchicalTokenPooling
        pooler = HierarchicalTokenPooling(pool_factor=a.pool_factor, num_protected_tokens=1,
                                          normalize_embeddings=False)

        def call():
            with torch.inference_mode():
                return pooler.pool(docs)
    pooled = call()  # warm-up
    times = []
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    median = sorted(times)[len(times) // 2]
    print(json.dumps({"seconds": median, "documents": len(docs), "ms_per_doc": 1e3 * median / len(docs),
                      "vectors_per_doc": sum(len(d) for d in pooled) / len(pooled)}))


COMMANDS = {"to-pylate": to_pylate, "vectors": vectors, "compare": compare, "score": score,
            "doc-vectors": doc_vectors, "pool": pool}

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in COMMANDS:
        COMMANDS[sys.argv[1]](sys.argv[2:])
    else:
        train(sys.argv[1:])
