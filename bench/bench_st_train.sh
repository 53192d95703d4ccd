#!/usr/bin/env bash
# spread's contrastive training of an imported sentence-transformers model against sentence-transformers' own
# training loop (target: spread >= 1.25x), same CPU, threads, model, pairs and batch:
#   model   a random all-MiniLM-L6-v2-shaped folder (BertModel, 6 layers, width 384, 12 heads, intermediate 1536,
#           mean pooling + Normalize, bert-base-uncased's 30,522 pieces; tests/oracles/hf_model_ref.py make st, cached)
#   pairs   SciFact title -> abstract (5,183 pairs), texts cut to 64 tokens: full-length batches, as fine-tuning data
#   loss    in-batch InfoNCE with scale 20 (temperature 0.05), batch 64, AdamW lr 2e-5, dropout 0, float32:
#           MNRL    MultipleNegativesRankingLoss      against spread's loss.contrastive (mini_batch 0)
#           cached  CachedMultipleNegativesRankingLoss(mini_batch_size 32)  against loss.contrastive.mini_batch 32
#   and PyLate's training step (pylate.losses.Contrastive, ColBERTCollator, the same trainer) on a PyLate folder of the
#   same encoder shape (1_Dense to 128, queries 32 tokens with [MASK] expansion, documents 180) against spread's
#   maxsim from that folder (train.init_from), batch 32, MaxSim temperature 1 as PyLate's; speed in queries/s
#   speed   pairs/s, the median over windows of 5 steps after the first 5 (the peer: bench/bench_st_train_peer.py
#           times SentenceTransformerTrainer's steps by a callback; spread: its logged pairs_per_s)
# ROUNDS rounds (default 3), the peer first in odd rounds and spread first in even ones; the ratio is of the sums.
# Both print their first step's loss (different random batches: a sanity check that both train the same loss on the
# same model, near ln 64 = 4.16 for a random one; exact agreement of the losses is tests/test_contrastive.cpp's).
#   bench/bench_st_train.sh        (STEPS=40 THREADS=2 ROUNDS=3 BENCH_DIR=/tmp/spread_bench_st_train
#                                     SPREAD_BUILD=build: the build folder whose spread is measured)
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
data=${SPREAD_DATA:-../shared/data}
tokdir=$data/tokenizers/bert-base-uncased corpus=$data/scifact-train/corpus.jsonl
for f in "$tokdir/tokenizer.json" "$corpus"; do
  [[ -f $f ]] || { echo "bench_st_train: skipped: no $f (set SPREAD_DATA to the data root)"; exit 0; }
done
steps=${STEPS:-40} threads=${THREADS:-2} rounds=${ROUNDS:-3} batch=64
bench_dir=${BENCH_DIR:-/tmp/spread_bench_st_train}
mkdir -p "$bench_dir"
spread_build=${SPREAD_BUILD:-build}
[[ $spread_build == build ]] && scripts/build.sh --target spread >/dev/null
python=$(scripts/python_env.sh | tail -1)
export OMP_NUM_THREADS=$threads MKL_NUM_THREADS=$threads HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=error

model=$bench_dir/minilm-l6-v2-shape-seed0
if [[ ! -f $model.ok ]]; then
  rm -rf "$model"
  "$python" tests/oracles/hf_model_ref.py make st "$model" --tokenizer "$tokdir" --layers 6 --heads 12 --width 384 \
    --intermediate 1536 --max-position 512 --max-seq-length 256 --pooling mean --normalize --seed 0 >&2
  touch "$model.ok"
fi
colbert=$bench_dir/colbert-minilm-l6-shape-seed0
if [[ ! -f $colbert.ok ]]; then
  rm -rf "$colbert"
  "$python" tests/oracles/hf_model_ref.py make pylate "$colbert" --tokenizer "$tokdir" --layers 6 --heads 12 --width 384 \
    --intermediate 1536 --max-position 512 --dim 128 --query-length 32 --document-length 180 --seed 0 >&2
  touch "$colbert.ok"
fi
pairs=$bench_dir/scifact_title_abstract.tsv
"$python" - "$corpus" "$pairs" <<'PY'
import json, sys
with open(sys.argv[1], encoding="utf-8") as f, open(sys.argv[2], "w", encoding="utf-8") as out:
    out.write("anchor\tpositive\n")
    for line in f:
        d = json.loads(line)
        title, text = (" ".join(d[k].split()) for k in ("title", "text"))
        if title and text:
            out.write(f"{title}\t{text}\n")
PY

batch_of() { [[ $1 == pylate ]] && echo 32 || echo $batch; }
peer() {  # peer LOSS -> one JSON line
  local folder=$model
  [[ $1 == pylate ]] && folder=$colbert
  "$python" bench/bench_st_train_peer.py "$folder" "$pairs" --loss "$1" --batch "$(batch_of "$1")" --steps "$steps" \
    --threads "$threads" 2>"$bench_dir/peer.err" | tail -1 ||
    { echo "peer failed: $(tail -3 "$bench_dir/peer.err")" >&2; return 1; }
}
mine() {  # mine LOSS ROUND -> "pairs/s first_loss"
  local mini=0 name="st_$1_$2" objective=(recipes/finetune_st_wordnet.toml --set train.init_from="$model" --set eval.sts=""
    --set data.max_length=64 --set loss.contrastive.temperature=0.05 --set loss.contrastive.mask_duplicates=false)
  [[ $1 == cached ]] && mini=32
  [[ $1 == pylate ]] && objective=(recipes/finetune_colbert_scifact.toml --set train.init_from="$colbert")
  [[ $1 != pylate ]] && objective+=(--set loss.contrastive.mini_batch=$mini)
  rm -rf "${bench_dir:?}/runs/$name"
  "$spread_build"/spread train "${objective[@]}" --set run.name="$name" --set run.out_dir="$bench_dir/runs" \
    --set data.source=pairs --set data.path="$pairs" \
    --set data.val_fraction=0.01 --set train.batch_size="$(batch_of "$1")" --set train.max_steps="$steps" --set train.lr=2e-5 \
    --set train.min_lr=2e-5 --set train.warmup_steps=5 --set train.weight_decay=0.01 --set train.eval_every=0 \
    --set train.ckpt_every=0 --set train.log_every=5 --set model.dropout=0 --set run.threads="$threads" \
    --set diagnostics.every=0 >"$bench_dir/$name.log" 2>&1 ||
    { echo "spread failed: $(tail -3 "$bench_dir/$name.log")" >&2; return 1; }
  "$python" - "$bench_dir/runs/$name/metrics.jsonl" <<'PY'
import json, statistics, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
key = "queries_per_s" if any("queries_per_s" in l for l in lines) else "pairs_per_s"
rates = [l[key] for l in lines if key in l and l["step"] > 5]
first = min((l for l in lines if "loss" in l and "step" in l), key=lambda l: l["step"])["loss"]
print(f"{statistics.median(rates):.2f} {first:.4f}")
PY
}

harness() { python3 bench/harness.py "$@"; }  # medians, ratios, JSON lines (bench/harness.py)
declare -A sum values
for round in $(seq "$rounds"); do
  for loss in mnrl cached pylate; do
    if ((round % 2 == 1)); then p=$(peer $loss); m=$(mine $loss "$round"); else m=$(mine $loss "$round"); p=$(peer $loss); fi
    read -r s s_loss <<<"$m"
    e=$(harness field "$p" pairs_per_s) e_loss=$(harness field "$p" first_loss)
    printf 'round %d %-6s spread %7.1f pairs/s (first loss %s)  peer %7.1f pairs/s (first loss %s)\n' \
      "$round" "$loss" "$s" "$s_loss" "$e" "$e_loss"
    sum[${loss}_s]=$("$python" -c "print(${sum[${loss}_s]:-0} + $s)")
    sum[${loss}_e]=$("$python" -c "print(${sum[${loss}_e]:-0} + $e)")
    values[${loss}_s]+=" $s" values[${loss}_e]+=" $e"
  done
done
echo
echo "| loss | spread pairs/s | peer pairs/s | spread / peer |"
echo "|---|---:|---:|---:|"
for loss in mnrl cached pylate; do
  "$python" -c "import sys; s, e, n = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]);
print(f'| {sys.argv[4]} | {s / n:.1f} | {e / n:.1f} | {s / e:.2f}x |')" "${sum[${loss}_s]}" "${sum[${loss}_e]}" "$rounds" \
    "$(case $loss in mnrl) echo 'MNRL / in-batch (batch 64)' ;; cached) echo 'CachedMNRL (32) / mini_batch 32 (batch 64)' ;;
       *) echo 'PyLate Contrastive / maxsim (batch 32)' ;; esac)"
done
echo "(model $model, $steps steps, batch $batch, $threads threads, load average $(cut -d' ' -f1-3 /proc/loadavg))"
echo "Paired: the median of the per-round ratios (their range):"
for loss in mnrl cached pylate; do
  harness paired --no-table --digits 2 --bench bench_st_train --case "$loss" --unit pairs/s --a-label spread \
    --b-label peer --a "${values[${loss}_s]}" --b "${values[${loss}_e]}" --set steps="$steps" --set threads="$threads"
done
