#!/usr/bin/env bash
# Muon's cost per training step against AdamW's on shape B of bench/bench_lm.sh (6 layers, width 384, block 256,
# batch 8, char vocabulary of tiny shakespeare): two models of the same initial weights, one per optimizer, take
# steps in turn (bench_step, PAIRS alternating pairs, default 12), once with the Newton-Schulz products in bf16 (as
# torch.optim.Muon) and once in fp32, then in bf16 with 8 micro-steps per step (16,384 tokens). Newton-Schulz costs
# a fixed number of FLOPs per step (5 iterations of about 2(2m^2 n + m^3) per m x n matrix, m <= n: 95 GFLOP on
# shape B) while the forward and backward passes grow with the tokens of a step (145 GFLOP at 2,048 tokens), so
# its share falls as the batch grows, as in the large-batch runs Muon was made for.
# Prints the CPU, the median step times and the cost of Muon's step.
# Usage: bench/bench_muon.sh [DATA_FILE]     (default $SPREAD_DATA/tinyshakespeare/input.txt)
set -euo pipefail
cd "$(dirname "$0")/.."
data=${1:-${SPREAD_DATA:-../shared/data}/tinyshakespeare/input.txt}
[[ -f "$data" ]] || { echo "bench_muon: no text at $data (give a DATA_FILE, or set SPREAD_DATA)" >&2; exit 2; }
build=${SPREAD_BUILD_DIR:-build}
[[ -x "$build/bench_step" ]] || { echo "bench_muon: build $build/bench_step first (scripts/build.sh)" >&2; exit 2; }
pairs=${PAIRS:-12}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(date -u +%FT%TZ); commit $(git rev-parse --short HEAD)"
common=(--set run.out_dir="$out" --set data.source=text --set data.path="$data" --set tokenizer.kind=char
        --set train.eval_every=0 --set train.ckpt_every=0 --set model.dropout=0.0
        --set model.n_layer=6 --set model.n_head=6 --set model.n_embd=384 --set model.block_size=256
        --set train.batch_size=8)
IFS=';' read -r -a runs <<<"${RUNS:-bf16 1;fp32 1;bf16 8}"   # RUNS="bf16 8" times one case: "PRECISION ACCUM;..."
for run in "${runs[@]}"; do
  read -r precision accum <<<"$run"
  echo "== Muon (Newton-Schulz in $precision) against AdamW, $((2048 * accum)) tokens per step"
  "$build/bench_step" recipes/shakespeare_char.toml "${common[@]}" --set train.grad_accum="$accum" \
    --pairs "$([[ $accum == 1 ]] && echo "$pairs" || echo "${PAIRS_ACCUM:-4}")" \
    --with train.optimizer=muon --with train.muon_ns_precision="$precision" | tail -2
done
