#!/usr/bin/env python3
"""The peer of bench/bench_st_train.sh: sentence-transformers' own training loop (SentenceTransformerTrainer)
with MultipleNegativesRankingLoss (scale 20) or CachedMultipleNegativesRankingLoss (mini_batch_size M) on a
sentence-transformers folder, or PyLate's training step (the same trainer with pylate.losses.Contrastive and
pylate.utils.ColBERTCollator, PyLate's documented setup) on a PyLate ColBERT folder (--loss pylate: its own query
and document lengths), and a TSV of pairs; CPU, float32, dropout 0 (every nn.Dropout set to p = 0, as spread's
model.dropout = 0), no evaluation, no saving.

    bench_st_train_peer.py MODEL_DIR PAIRS.tsv --loss mnrl|cached|pylate [--mini-batch 32] [--batch 64]
                           [--steps 40] [--max-length 64] [--threads 2] [--warmup-steps 5]

Prints one JSON line: {"pairs_per_s": median over windows of 5 optimizer steps after the warm-up steps,
"first_loss": the loss of step 1, "steps", "batch", "threads", "torch", "sentence_transformers"}.
"""
import argparse
import json
import os
import statistics
import tempfile
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model_dir")
    p.add_argument("pairs")
    p.add_argument("--loss", choices=("mnrl", "cached", "pylate"), required=True)
    for name, default in (("mini-batch", 32), ("batch", 64), ("steps", 40), ("max-length", 64), ("threads", 2),
                          ("warmup-steps", 5)):
        p.add_argument("--" + name, type=int, default=default)
    a = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    import sentence_transformers
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer, losses
    from sentence_transformers.training_args import BatchSamplers, SentenceTransformerTrainingArguments
    from transformers import TrainerCallback
    torch.set_num_threads(a.threads)

    anchors, positives = [], []
    with open(a.pairs, encoding="utf-8") as f:
        next(f)  # header: anchor \t positive
        for line in f:
            q, d = line.rstrip("\n").split("\t")[:2]
            anchors.append(q)
            positives.append(d)
    extra = {}
    if a.loss == "pylate":
        from pylate import losses as pylate_losses, models as pylate_models, utils as pylate_utils
        model = pylate_models.ColBERT(a.model_dir, device="cpu")
        loss = pylate_losses.Contrastive(model=model)
        extra["data_collator"] = pylate_utils.ColBERTCollator(model.tokenize)
    else:
        model = SentenceTransformer(a.model_dir, device="cpu", model_kwargs={"dtype": torch.float32})
        model.max_seq_length = a.max_length
        loss = (losses.MultipleNegativesRankingLoss(model, scale=20.0) if a.loss == "mnrl" else
                losses.CachedMultipleNegativesRankingLoss(model, scale=20.0, mini_batch_size=a.mini_batch))
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0

    class Clock(TrainerCallback):
        def __init__(self):
            self.ends, self.first_loss = [], None

        def on_step_end(self, args, state, control, **kw):
            self.ends.append(time.perf_counter())

        def on_log(self, args, state, control, logs=None, **kw):
            if self.first_loss is None and logs and "loss" in logs:
                self.first_loss = float(logs["loss"])

    clock = Clock()
    with tempfile.TemporaryDirectory() as out:
        args = SentenceTransformerTrainingArguments(
            output_dir=out, per_device_train_batch_size=a.batch, max_steps=a.steps, learning_rate=2e-5,
            warmup_steps=5, weight_decay=0.01, logging_steps=1, save_strategy="no", eval_strategy="no",
            report_to=[], dataloader_num_workers=0, use_cpu=True, seed=1, disable_tqdm=True,
            batch_sampler=BatchSamplers.NO_DUPLICATES)
        trainer = SentenceTransformerTrainer(model=model, args=args, loss=loss, callbacks=[clock],
                                             train_dataset=Dataset.from_dict({"anchor": anchors,
                                                                              "positive": positives}), **extra)
        trainer.train()
    ends = clock.ends[a.warmup_steps - 1:]
    rates = [5 * a.batch / (ends[i + 5] - ends[i]) for i in range(0, len(ends) - 5, 5)]
    print(json.dumps({"pairs_per_s": round(statistics.median(rates), 2), "first_loss": clock.first_loss,
                      "steps": a.steps, "batch": a.batch, "loss": a.loss, "threads": torch.get_num_threads(),
                      "torch": torch.__version__, "sentence_transformers": sentence_transformers.__version__}))


if __name__ == "__main__":
    main()
