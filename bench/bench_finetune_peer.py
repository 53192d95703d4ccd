"""The peer of bench/bench_finetune.sh: the same fine-tuning job done by sentence-transformers, as its
documentation does it (SentenceTransformerTrainer, MultipleNegativesRankingLoss or CachedMultipleNegativesRankingLoss,
BatchSamplers.NO_DUPLICATES), from loading the folder to saving the result.

    bench_finetune_peer.py --model DIR (--beir SPLIT_DIR [--qrels train] | --pairs MINED.jsonl) --out DIR
                           --loss mnrl|cached [--mini-batch 16] [--batch 32] [--steps 75] [--lr 2e-5]
                           [--warmup-steps 8] [--weight-decay 0.01] [--seed 1] [--threads 2] [--max-length 256]

The schedule is spread's (train/schedule.h: linear warmup to lr as (step + 1) / (warmup + 1), then a cosine to 0 at
the last step), set through a LambdaLR, so that both train with the same learning rates; AdamW with spread's
betas (0.9, 0.95), eps 1e-8 and weight-decay groups; scale 20 (temperature 0.05). Prints one JSON line: {"seconds": the whole job, "train_seconds",
"steps", "pairs", "first_loss", "last_loss"}.
"""
import argparse
import json
import math
import os
import sys
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--beir")
    p.add_argument("--qrels", default="train")
    p.add_argument("--pairs")
    p.add_argument("--out", required=True)
    p.add_argument("--loss", choices=("mnrl", "cached"), required=True)
    for name, kind, default in (("mini-batch", int, 16), ("batch", int, 32), ("steps", int, 75), ("lr", float, 2e-5),
                                ("warmup-steps", int, 8), ("weight-decay", float, 0.01), ("seed", int, 1),
                                ("threads", int, 2), ("max-length", int, 256)):
        p.add_argument("--" + name, type=kind, default=default)
    a = p.parse_args()
    start = time.perf_counter()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    import torch
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer, losses
    from sentence_transformers.training_args import BatchSamplers, SentenceTransformerTrainingArguments
    from transformers import TrainerCallback
    # The BEIR reader and the pairs of the mining oracle, shared with the tests (tests/oracles/).
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "oracles"))
    from beir_io import read_jsonl
    from mine_ref import beir_pairs

    torch.set_num_threads(a.threads)
    model = SentenceTransformer(a.model, device="cpu")
    model.max_seq_length = a.max_length
    if a.beir:
        anchors, positives, _ = beir_pairs(a.beir, a.qrels)
        columns = {"anchor": anchors, "positive": positives}
    else:
        rows = read_jsonl(a.pairs)
        columns = {key: [r[key] for r in rows] for key in rows[0]}
    dataset = Dataset.from_dict(columns)
    if a.loss == "mnrl":
        loss = losses.MultipleNegativesRankingLoss(model, scale=20.0)
    else:
        loss = losses.CachedMultipleNegativesRankingLoss(model, scale=20.0, mini_batch_size=a.mini_batch)

    # spread's groups (train/optimizer.cpp): weight decay on the matrices (dim >= 2), none on norms and biases.
    params = list(model.parameters())
    groups = [{"params": [q for q in params if q.dim() >= 2], "weight_decay": a.weight_decay},
              {"params": [q for q in params if q.dim() < 2], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=a.lr, betas=(0.9, 0.95), eps=1e-8)

    def spread_schedule(step):
        if step < a.warmup_steps:
            return (step + 1) / (a.warmup_steps + 1)
        ratio = (step - a.warmup_steps) / max(1, a.steps - a.warmup_steps)
        return 0.5 * (1 + math.cos(math.pi * min(1.0, ratio)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, spread_schedule)
    losses_seen = []

    class Record(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                losses_seen.append(logs["loss"])

    work = a.out + ".trainer"
    args = SentenceTransformerTrainingArguments(
        output_dir=work, per_device_train_batch_size=a.batch, max_steps=a.steps, seed=a.seed, data_seed=a.seed,
        batch_sampler=BatchSamplers.NO_DUPLICATES, logging_steps=1, save_strategy="no", report_to="none",
        use_cpu=True, dataloader_drop_last=False, max_grad_norm=1.0, disable_tqdm=True)
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=dataset, loss=loss,
                                         optimizers=(optimizer, scheduler), callbacks=[Record()])
    trained_from = time.perf_counter()
    trainer.train()
    train_seconds = time.perf_counter() - trained_from
    model.save(a.out)
    print(json.dumps({"seconds": time.perf_counter() - start, "train_seconds": train_seconds, "steps": a.steps,
                      "pairs": len(dataset), "first_loss": losses_seen[0] if losses_seen else None,
                      "last_loss": losses_seen[-1] if losses_seen else None}))


if __name__ == "__main__":
    main()
