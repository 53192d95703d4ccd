#!/usr/bin/env bash
# The token loader's cost: training steps of one model on the text's own train.bin (A, tokenised into the run)
# against the same model on a [[data.mix]] of two token files read where they are (B: the training split at weight
# 0.7 and the validation split at 0.3, so each window first draws its set), alternating in one process (bench_step,
# PAIRS pairs, default 16). The quickstart's shape (4 layers, width 128, block 128, batch 16: 2,048 tokens a step)
# with a BPE tokenizer of 2,048 ids learnt from tiny shakespeare by a one-step prep run: the smallest step spread's
# recipes take, so the loader's share is at its largest here. Target: B within 1% of A. Since alternating steps
# resolve a few percent at best on a shared machine, the loader is also timed alone (bench_loader: the median time
# of drawing one step's batch, plain and mixed) and given as a share of A's step.
# Prints the CPU, the median step times, B's cost over A, and the loader's share of a step.
# Usage: bench/bench_shards.sh [TEXT_FILE]     (default $SPREAD_DATA/tinyshakespeare/input.txt)
set -euo pipefail
cd "$(dirname "$0")/.."
data=${1:-${SPREAD_DATA:-../shared/data}/tinyshakespeare/input.txt}
[[ -f "$data" ]] || { echo "bench_shards: no text at $data (give a TEXT_FILE, or set SPREAD_DATA)" >&2; exit 2; }
build=${SPREAD_BUILD_DIR:-build}
for tool in spread bench_step bench_loader; do
  [[ -x "$build/$tool" ]] || { echo "bench_shards: build $build/$tool first (scripts/build.sh)" >&2; exit 2; }
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(date -u +%FT%TZ); commit $(git rev-parse --short HEAD)"
text=(--set data.source=text --set data.path="$data")
echo "== prep: the tokenizer and token files of $data"
"$build/spread" train recipes/quickstart.toml --set run.out_dir="$out" --set run.name=prep "${text[@]}" \
  --set train.max_steps=1 --set train.eval_every=0 --set train.ckpt_every=0 --set diagnostics.every=0 >/dev/null
prep="$out/prep"
echo "== A: $prep/train.bin as the text's own token file; B: [[data.mix]] of train.bin (0.7) and val.bin (0.3)"
"$build/bench_step" recipes/quickstart.toml --set run.out_dir="$out" "${text[@]}" \
  --set tokenizer.model="$prep/tokenizer.model" --set train.eval_every=0 --set train.ckpt_every=0 \
  --set diagnostics.every=0 --pairs "${PAIRS:-16}" \
  --with "data.mix=[{shards = \"$prep/train.bin\", weight = 0.7}, {shards = \"$prep/val.bin\", weight = 0.3}]" \
  --with data.val_shards="$prep/val.bin" | tail -2 | tee "$out/step.txt"
a_ms=$(tail -1 "$out/step.txt" | sed 's/.*"a_ms": \([0-9.]*\).*/\1/')
echo "== the loader alone (bench_loader: batches of 16 windows of 128 tokens), against A's step of $a_ms ms"
for sets in "$prep/train.bin" "$prep/train.bin:0.7 $prep/val.bin:0.3"; do
  # shellcheck disable=SC2086  # the sets are separate arguments
  line=$("$build/bench_loader" $sets --batch 16 --block 128)
  us=$(sed 's/.*"median_us": \([0-9.]*\).*/\1/' <<<"$line")
  echo "$line  -> $(awk -v us="$us" -v ms="$a_ms" 'BEGIN { printf "%.4f%% of a step", 100 * us / (1000 * ms) }')"
done
