#!/usr/bin/env bash
# Data-parallel scaling on CPU (train/distributed.h): tokens/s of 2 Gloo processes with 1 thread each (spread train
# --nproc 2, batch 8 per rank) against 1 process with 1 thread (batch 8), on shape B of bench/bench_lm.sh
# (6 layers, 6 heads, width 384, block 256; char vocabulary of tiny shakespeare).
#   efficiency = tokens/s (2 processes) / (2 x tokens/s (1 process))
#   communication share = seconds rank 0 spent in the gradient all-reduce and the loss average (waiting for the
#                         other rank included) / its training seconds, over the logged windows after warm-up
# Both use the median tokens/s of the logged windows after step 5. Needs 2 free cores to mean anything.
# The 2-process run goes twice: with the all-reduce overlapping backward (the default) and after it
# (SPREAD_DDP_OVERLAP=0); with the overlap, the share counts only the communication backward did not hide.
# Usage: bench/bench_ddp.sh [DATA_FILE]     (default $SPREAD_DATA/tinyshakespeare/input.txt; SPREAD_DATA defaults to ../shared/data); STEPS (default 30),
#   ROUNDS (default 3)
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
data="${1:-${SPREAD_DATA:-../shared/data}/tinyshakespeare/input.txt}"
[[ -f "$data" ]] || { echo "no data file $data (pass one as the first argument)"; exit 2; }
[[ -x build/spread ]] || scripts/build.sh --target spread >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
steps=${STEPS:-30}

common=(--set run.out_dir="$out" --set data.source=text --set data.path="$data" --set tokenizer.kind=char
        --set train.eval_every=0 --set train.ckpt_every=0 --set train.log_every=5 --set model.dropout=0.0
        --set train.warmup_steps=5 --set run.threads=1
        --set model.n_layer=6 --set model.n_head=6 --set model.n_embd=384 --set model.block_size=256
        --set train.batch_size=8 --set train.max_steps="$steps")

# "tokens/s comm_share" of one run directory.
summary() {
  python3 - "$1" <<'PY'
import json, statistics, sys
lines = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
steps = [l for l in lines if "tokens_per_s" in l]
late = [l for l in steps if l["step"] > 5]
tps = statistics.median(l["tokens_per_s"] for l in late)
share = float("nan")
if "comm_s" in late[0]:
    share = (late[-1]["comm_s"] - late[0]["comm_s"]) / (late[-1]["elapsed_s"] - late[0]["elapsed_s"])
print(f"{tps:.0f} {share:.3f}")
PY
}

# ROUNDS rounds of the three runs, the order rotating each round (a shared machine drifts by tens of percent within
# minutes: each round's efficiency compares runs made minutes apart), then the medians over rounds.
run_case() {  # CASE ROUND: one run, prints "tokens/s comm_share"
  local name=$1$2
  case $1 in
    one) build/spread train recipes/shakespeare_char.toml --set run.name="$name" "${common[@]}" >"$out/$name.log" ;;
    two) build/spread train recipes/shakespeare_char.toml --set run.name="$name" --nproc 2 "${common[@]}" \
           >"$out/$name.log" ;;
    after) SPREAD_DDP_OVERLAP=0 build/spread train recipes/shakespeare_char.toml --set run.name="$name" --nproc 2 \
             "${common[@]}" >"$out/$name.log" ;;
  esac
  summary "$out/$name"
}
rounds=${ROUNDS:-3}
results=()
cases=(one two after)
for round in $(seq "$rounds"); do
  declare -A r=()
  for i in 0 1 2; do
    c=${cases[$(( (i + round - 1) % 3 ))]}
    r[$c]=$(run_case "$c" "$round")
  done
  results+=("${r[one]} ${r[two]} ${r[after]}")
  unset r
done
python3 - "$steps" "${results[@]}" <<'PY'
import statistics, sys
steps, rounds = sys.argv[1], [list(map(float, r.split())) for r in sys.argv[2:]]
print(f"shape B, {steps} steps, 1 thread per process, {len(rounds)} rounds (order rotating)")
print("round | 1 process tok/s | 2 processes overlap tok/s (eff., comm) | 2 processes after backward tok/s (eff., comm)")
effs, effs_after = [], []
for i, (one, _, two, share, after, after_share) in enumerate(rounds, 1):
    effs.append(two / (2 * one)); effs_after.append(after / (2 * one))
    print(f"{i} | {one:.0f} | {two:.0f} ({effs[-1]:.2f}, {100 * share:.1f}%) | {after:.0f} ({effs_after[-1]:.2f}, "
          f"{100 * after_share:.1f}%)")
print(f"median efficiency: overlapping {statistics.median(effs):.2f}, after backward {statistics.median(effs_after):.2f}; "
      f"median communication share: {100 * statistics.median(r[3] for r in rounds):.1f}% / "
      f"{100 * statistics.median(r[5] for r in rounds):.1f}% of rank 0's step time")
PY
