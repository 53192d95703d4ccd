#!/usr/bin/env bash
# Data-parallel scaling on CPU (train/distributed.h): tokens/s of 2 Gloo processes with 1 thread each (spread train
# --nproc 2, batch 8 per rank) against 1 process with 1 thread (batch 8), on shape B of scripts/bench_lm.sh
# (6 layers, 6 heads, width 384, block 256; char vocabulary of tiny shakespeare).
#   efficiency = tokens/s (2 processes) / (2 x tokens/s (1 process))
#   communication share = seconds rank 0 spent in the gradient all-reduce and the loss average (waiting for the
#                         other rank included) / its training seconds, over the logged windows after warm-up
# Both use the median tokens/s of the logged windows after step 5. Needs 2 free cores to mean anything.
# The 2-process run goes twice: with the all-reduce overlapping backward (the default) and after it
# (SPREAD_DDP_OVERLAP=0); with the overlap, the share counts only the communication backward did not hide.
# Usage: scripts/bench_ddp.sh [DATA_FILE]     (default ../shared/data/tinyshakespeare/input.txt); STEPS (default 30)
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
data="${1:-../shared/data/tinyshakespeare/input.txt}"
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

build/spread train recipes/shakespeare_char.toml --set run.name=one "${common[@]}" >"$out/one.log"
read -r one _ < <(summary "$out/one")
build/spread train recipes/shakespeare_char.toml --set run.name=two --nproc 2 "${common[@]}" >"$out/two.log"
read -r two share < <(summary "$out/two")
SPREAD_DDP_OVERLAP=0 build/spread train recipes/shakespeare_char.toml --set run.name=after --nproc 2 "${common[@]}" \
  >"$out/after.log"
read -r after after_share < <(summary "$out/after")
python3 - "$one" "$two" "$share" "$steps" "$after" "$after_share" <<'PY'
import sys
one, two, share, steps, after, after_share = map(float, sys.argv[1:])
print(f"shape B, {steps:.0f} steps, 1 thread per process")
print(f"1 process : {one:8.0f} tok/s (batch 8)")
print(f"2 processes: {two:8.0f} tok/s (batch 8 per rank, Gloo on loopback, all-reduce overlapping backward)")
print(f"efficiency {two / (2 * one):.2f}, communication share {100 * share:.1f}% of rank 0's step time")
print(f"2 processes, all-reduce after backward (SPREAD_DDP_OVERLAP=0): {after:8.0f} tok/s, efficiency "
      f"{after / (2 * one):.2f}, communication share {100 * after_share:.1f}%")
PY
