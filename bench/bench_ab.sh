#!/usr/bin/env bash
# Two builds of spread on the same training run, alternating (base, new, new, base, ...), so that the drift of a
# shared machine lands on both: the speed of a change measured end to end, not from a kernel benchmark.
# Shape B of bench/bench_lm.sh by default (6 layers, 6 heads, width 384, block 256, batch 8, char vocabulary of
# tiny shakespeare, dropout 0); SHAPE=A for the small one. Each run trains STEPS steps; its speed is the median
# tokens/s over the logged windows after step 5. Prints the pairs, the median of the per-pair ratios new / base and
# their range (bench/harness.py), which also appends them as one JSON line to its results file (BENCH_RESULTS).
#   cp build/spread build/spread_base   # before the change (build/ is ignored by git)
#   ... change, scripts/build.sh --target spread ...
#   bench/bench_ab.sh build/spread_base [build/spread]
# Environment: PAIRS (6), STEPS (40 for B, 400 for A), SHAPE (B), and EXTRA: more --set overrides for both, e.g.
#   EXTRA="--set train.precision=bf16" bench/bench_ab.sh build/spread_base
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
base=${1:?usage: bench/bench_ab.sh BASE_BINARY [NEW_BINARY]} new=${2:-build/spread}
for bin in "$base" "$new"; do [[ -x $bin ]] || { echo "not an executable: $bin"; exit 2; }; done
data="${SPREAD_DATA:-../shared/data}/tinyshakespeare/input.txt"
[[ -f $data ]] || { echo "no data file $data"; exit 2; }
pairs=${PAIRS:-6} shape=${SHAPE:-B}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

common=(--set run.out_dir="$out" --set data.source=text --set data.path="$data" --set tokenizer.kind=char
        --set train.eval_every=0 --set train.ckpt_every=0 --set train.log_every=5 --set model.dropout=0.0
        --set train.warmup_steps=5 --set diagnostics.every=0)
case $shape in
  A) shape_args=(--set model.n_layer=4 --set model.n_head=4 --set model.n_embd=128 --set model.block_size=64
                 --set train.batch_size=12 --set train.max_steps="${STEPS:-400}") ;;
  B) shape_args=(--set model.n_layer=6 --set model.n_head=6 --set model.n_embd=384 --set model.block_size=256
                 --set train.batch_size=8 --set train.max_steps="${STEPS:-40}") ;;
  *) echo "SHAPE must be A or B"; exit 2 ;;
esac
read -r -a extra <<<"${EXTRA:-}"

tokens_per_s() {  # BINARY NAME: trains one run, prints its median tokens/s after step 5
  "$1" train recipes/shakespeare_char.toml --set run.name="$2" "${common[@]}" "${shape_args[@]}" "${extra[@]}" \
    >"$out/$2.log" 2>&1 || { cat "$out/$2.log"; exit 1; }
  python3 - "$out/$2/metrics.jsonl" <<'PY'
import json, statistics, sys
rates = [l["tokens_per_s"] for l in map(json.loads, open(sys.argv[1])) if "tokens_per_s" in l and l["step"] > 5]
print(f"{statistics.median(rates):.1f}")
PY
}

bases=() news=()
for i in $(seq "$pairs"); do
  if (( i % 2 )); then b=$(tokens_per_s "$base" "base$i"); n=$(tokens_per_s "$new" "new$i")
  else n=$(tokens_per_s "$new" "new$i"); b=$(tokens_per_s "$base" "base$i"); fi
  bases+=("$b") news+=("$n")
  echo "pair $i: base $b, new $n tokens/s" >&2
done
echo "shape $shape, tokens/s of alternating pairs (load average at the end $(cut -d' ' -f1-3 /proc/loadavg)):"
python3 bench/harness.py paired --bench bench_ab --a-label new --b-label base --unit tokens/s \
  --a "${news[*]}" --b "${bases[*]}" --set shape="$shape" --set extra="${EXTRA:-}"
