#!/usr/bin/env bash
# Training throughput and MFU of `spread train` for two shapes (char vocabulary of tiny shakespeare):
#   A = 4 layers, 4 heads, width 128, block 64, batch 12     B = 6 layers, 6 heads, width 384, block 256, batch 8
# MFU = model FLOPs per second (6N + 12*L*C*T per token, as nanoGPT) over the float32 matmul peak measured in
# this same run. Also: peak RSS, the speed of nanoGPT on the same shapes (scripts/nanogpt_ref.py, alternating
# with spread over ROUNDS rounds, default 2) and the cost of dispersion loss on shape B (last and all layers).
# Usage: scripts/bench_lm.sh [DATA_FILE]     (default ../shared/data/tinyshakespeare/input.txt)
# BLAS: OPENBLAS_CORETYPE is left as the environment has it; `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE
# scripts/bench_lm.sh` lets spread choose the core itself.
set -euo pipefail
cd "$(dirname "$0")/.."
data="${1:-../shared/data/tinyshakespeare/input.txt}"
[[ -f "$data" ]] || { echo "no data file $data (pass one as the first argument)"; exit 2; }
scripts/build.sh --target spread bench_matmul bench_step >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

matmul=$(build/bench_matmul)
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$matmul" "$1"; }
peak=$(field matmul_peak_gflops)
echo "matmul peak: ${peak} GFLOP/s ($(field blas) $(field threading), core $(field core), $(field origin))"
# The reference runs under the same BLAS core: the one spread chose itself, if it did.
ref_env=()
[[ "$(field origin)" == "spread (auto)" ]] && ref_env=(OPENBLAS_CORETYPE="$(field core)")

common=(--set run.out_dir="$out" --set data.source=text --set data.path="$data" --set tokenizer.kind=char
        --set train.eval_every=0 --set train.ckpt_every=0 --set train.log_every=5 --set model.dropout=0.0
        --set train.warmup_steps=5)
shape_a=(--set model.n_layer=4 --set model.n_head=4 --set model.n_embd=128 --set model.block_size=64
         --set train.batch_size=12 --set train.max_steps=${STEPS_A:-150})
shape_b=(--set model.n_layer=6 --set model.n_head=6 --set model.n_embd=384 --set model.block_size=256
         --set train.batch_size=8 --set train.max_steps=${STEPS_B:-40})

# Median tokens/s over the logged windows after the first (warm-up), params and peak RSS of one run.
measure() {
  local name=$1; shift
  build/spread train recipes/shakespeare_char.toml --set run.name="$name" "${common[@]}" "$@" >"$out/$name.log"
  python3 - "$out/$name" "$peak" <<'PY'
import json, statistics, sys
run, peak = sys.argv[1], float(sys.argv[2])
lines = [json.loads(l) for l in open(run + "/metrics.jsonl")]
tps = [l["tokens_per_s"] for l in lines if "tokens_per_s" in l and l["step"] > 5]
info = json.load(open(run + "/run.json"))
import tomllib
rec = tomllib.load(open(run + "/recipe.toml", "rb"))["model"]
n = info["parameters"]
flops = 6 * n + 12 * rec["n_layer"] * rec["n_embd"] * rec["block_size"]
end = [l for l in lines if l.get("event") == "end"][0]
t = statistics.median(tps)
print(f'{t:.0f} {100 * t * flops / (peak * 1e9):.1f} {end["peak_rss_mib"]:.0f}')
PY
}

# nanoGPT (scripts/nanogpt_ref.py on Debian's python3-torch, PyTorch 1.13) on the same shapes, data and BLAS,
# alternating with spread, so that the ratio is measured within minutes rather than across the machine's drift.
ref_python=${NANOGPT_PYTHON:-/usr/bin/python3}
have_ref=0
"$ref_python" -c 'import torch' 2>/dev/null && have_ref=1
[[ $have_ref == 1 ]] || echo "(no nanoGPT reference: $ref_python cannot import torch; apt-get install python3-torch)"
reference() {
  env "${ref_env[@]}" "$ref_python" scripts/nanogpt_ref.py "$data" "$@" |
    python3 -c 'import json,sys; print(round(json.load(sys.stdin)["tokens_per_s"]))'
}
ref_a=(--n-layer 4 --n-head 4 --n-embd 128 --block 64 --batch 12 --steps "${STEPS_A:-150}")
ref_b=(--n-layer 6 --n-head 6 --n-embd 384 --block 256 --batch 8 --steps "${STEPS_B:-40}")

printf '%-28s %10s %6s %9s %10s\n' "case" "tokens/s" "MFU%" "RSS MiB" "x nanoGPT"
declare -A sums
for round in $(seq "${ROUNDS:-2}"); do
  for shape in A B; do
    if [[ $shape == A ]]; then spread_args=("${shape_a[@]}"); ref_args=("${ref_a[@]}");
    else spread_args=("${shape_b[@]}"); ref_args=("${ref_b[@]}"); fi
    ratio="-"
    if [[ $have_ref == 1 ]]; then
      ref=$(reference "${ref_args[@]}")
      printf '%-28s %10s\n' "nanoGPT $shape" "$ref"
      sums[ref_$shape]=$(( ${sums[ref_$shape]:-0} + ref ))
    fi
    read -r tps mfu rss <<<"$(measure "${shape,,}$round" "${spread_args[@]}")"
    [[ $have_ref == 1 ]] && ratio=$(python3 -c "print(f'{$tps / $ref:.2f}')")
    printf '%-28s %10s %6s %9s %10s\n' "spread $shape (round $round)" "$tps" "$mfu" "$rss" "$ratio"
    sums[spread_$shape]=$(( ${sums[spread_$shape]:-0} + tps ))
  done
done
if [[ $have_ref == 1 ]]; then
  for shape in A B; do
    python3 -c "print(f'shape $shape: spread / nanoGPT over all rounds = {${sums[spread_$shape]} / ${sums[ref_$shape]}:.2f}x')"
  done
fi

# The cost of dispersion is measured in one process (bench_step): separate runs differ by the machine's drift
# (±4% between two 40 s runs here), more than the cost itself; alternating steps in one process cancels it.
bench_step=(build/bench_step recipes/shakespeare_char.toml "${common[@]}" "${shape_b[@]}" --pairs "${PAIRS:-16}"
            --with loss.dispersion.enabled=true)
cost() { "${bench_step[@]}" "$@" | python3 -c 'import json,sys; print(json.loads(sys.stdin.read().splitlines()[-1])["cost_pct"])'; }
echo "dispersion (last layer) step-time cost on B: $(cost)% (median of per-pair ratios, ${PAIRS:-16} alternating pairs)"
echo "dispersion (all layers) step-time cost on B: $(cost --with loss.dispersion.layers=all)%"
if [[ "${THREADS_SWEEP:-0}" == 1 ]]; then
  for t in 1 2; do
    read -r tps mfu rss <<<"$(measure a_t$t "${shape_a[@]}" --set run.threads=$t)"
    printf '%-28s %10s %6s %9s\n' "spread A threads=$t/$t" "$tps" "$mfu" "$rss"
  done
fi
