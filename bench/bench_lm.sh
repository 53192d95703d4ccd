#!/usr/bin/env bash
# Training throughput and MFU of `spread train` for two shapes (char vocabulary of tiny shakespeare):
#   A = 4 layers, 4 heads, width 128, block 64, batch 12     B = 6 layers, 6 heads, width 384, block 256, batch 8
# MFU = model FLOPs per second (6N + 12*L*C*T per token, as nanoGPT) over the float32 matmul peak measured in
# this same run. Also: peak RSS, the speed of nanoGPT on the same shapes (bench/nanogpt_ref.py, alternating
# with spread over ROUNDS rounds, default 2) and the cost of dispersion loss on shape B (last and all layers).
# And bf16 mixed precision (train.precision = "bf16") against float32 on shape B, alternating in one process, with
# MFU against this run's float32 and bf16 matmul peaks (BF16_ONLY=1: the peaks and this comparison only), and
# shape B in bf16 between each round's nanoGPT runs (BF16_ROWS=0 leaves these rows out).
# Usage: bench/bench_lm.sh [DATA_FILE]     (default $SPREAD_DATA/tinyshakespeare/input.txt; SPREAD_DATA defaults to ../shared/data)
# BLAS: OPENBLAS_CORETYPE is left as the environment has it; `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE
# bench/bench_lm.sh` lets spread choose the core itself.
set -euo pipefail
shopt -s inherit_errexit  # a failing command inside $(...) stops the script too
cd "$(dirname "$0")/.."
source bench/lm_bench_common.sh "$@"

# bf16 against float32 on shape B: two models of the same initial weights take steps in turn (bench_step), so the
# machine's drift lands on both; the ratio is the median of the per-pair ratios.
bf16_vs_fp32() {
  local r
  r=$(build/bench_step recipes/shakespeare_char.toml "${common[@]}" "${shape_b[@]}" --pairs "$pairs" \
        --with train.precision=bf16 | tee "$out/bf16.log")
  grep '^precision\|^warning' "$out/bf16.log" || true
  python3 - "$(tail -1 <<<"$r")" "$peak" "$bf16_peak" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import json, sys
r, peak, bf16_peak, load = json.loads(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
tps = lambda ms: r["tokens_per_step"] / (ms / 1e3)
mfu = lambda ms, p: 100 * tps(ms) * r["flops_per_token"] / (p * 1e9) if p > 0 else float("nan")
a, b = r["a_ms"], r["b_ms"]
print(f'shape B fp32: {tps(a):.0f} tokens/s, MFU {mfu(a, peak):.1f}% of the fp32 peak')
print(f'shape B {r["b_precision"]}: {tps(b):.0f} tokens/s, MFU {mfu(b, bf16_peak):.1f}% of the bf16 peak '
      f'({mfu(b, peak):.1f}% of the fp32 peak)')
print(f'bf16 / fp32 speed: {1 / (1 + r["cost_pct"] / 100):.3f}x (median of {r["pairs"]} alternating pairs; '
      f'load average {load})')
PY
}
if [[ "${BF16_ONLY:-0}" == 1 ]]; then bf16_vs_fp32; exit 0; fi

# nanoGPT (bench/nanogpt_ref.py on Debian's python3-torch, PyTorch 1.13, as Debian runs it: one LibTorch
# thread, the system's OpenBLAS) on the same shapes, data and BLAS core, alternating with spread (nanoGPT
# first in odd rounds, spread first in even ones), so the ratio is measured within minutes, not across drift.
ref_python=${NANOGPT_PYTHON:-/usr/bin/python3}
have_ref=0
"$ref_python" -c 'import torch' 2>/dev/null && have_ref=1
[[ $have_ref == 1 ]] || echo "(no nanoGPT reference: $ref_python cannot import torch; apt-get install python3-torch)"
reference() {
  local r
  r=$(env "${ref_env[@]}" "$ref_python" bench/nanogpt_ref.py "$data" "$@")
  [[ $round == 1 && $shape == A ]] && echo "nanoGPT reference: $r" >&2
  printf '%.0f\n' "$(json_field "$r" tokens_per_s)"
}
ratio_of() { harness ratio --digits 2 "$1" "$2"; }
row() { printf '%-28s %10s %6s %9s %10s\n' "$@"; }

row "case" "tokens/s" "MFU%" "RSS MiB" "x nanoGPT"
declare -A sums
for round in $(seq "${ROUNDS:-2}"); do
  for shape in A B; do
    if [[ $shape == A ]]; then spread_args=("${shape_a[@]}"); ref_args=("${ref_a[@]}");
    else spread_args=("${shape_b[@]}"); ref_args=("${ref_b[@]}"); fi
    ref=""
    if [[ $have_ref == 1 && $((round % 2)) == 1 ]]; then ref=$(reference "${ref_args[@]}"); fi
    r=$(measure "${shape,,}$round" "${spread_args[@]}")
    read -r tps mfu rss <<<"$r"
    # Shape B also in bf16 (train.precision; float32 where the CPU has no bf16), between the same round's
    # nanoGPT runs, so bf16 against nanoGPT is a ratio measured within minutes too.
    if [[ $shape == B && "${BF16_ROWS:-1}" == 1 ]]; then
      r=$(measure "b16_$round" "${spread_args[@]}" --set train.precision=bf16)
      read -r tps16 mfu16 rss16 <<<"$r"
    fi
    if [[ $have_ref == 1 && -z $ref ]]; then ref=$(reference "${ref_args[@]}"); fi
    ratio="-"
    if [[ -n $ref ]]; then
      ratio=$(ratio_of "$tps" "$ref")
      row "nanoGPT $shape (round $round)" "$ref"
      sums[ref_$shape]=$(( ${sums[ref_$shape]:-0} + ref ))
    fi
    row "spread $shape (round $round)" "$tps" "$mfu" "$rss" "$ratio"
    sums[spread_$shape]=$(( ${sums[spread_$shape]:-0} + tps ))
    if [[ $shape == B && "${BF16_ROWS:-1}" == 1 ]]; then
      ratio16="-"
      [[ -n $ref ]] && ratio16=$(ratio_of "$tps16" "$ref")
      row "spread B bf16 (round $round)" "$tps16" "$mfu16" "$rss16" "$ratio16"
      sums[spread_B16]=$(( ${sums[spread_B16]:-0} + tps16 ))
    fi
  done
done
if [[ $have_ref == 1 ]]; then
  for shape in A B; do
    echo "shape $shape: spread / nanoGPT, all rounds: $(ratio_of "${sums[spread_$shape]}" "${sums[ref_$shape]}")x"
  done
  if [[ "${BF16_ROWS:-1}" == 1 ]]; then
    echo "shape B: spread bf16 / nanoGPT, all rounds: $(ratio_of "${sums[spread_B16]}" "${sums[ref_B]}")x" \
         "(MFU of the bf16 rows against the float32 peak)"
  fi
fi

# The cost of dispersion is measured in one process (bench_step): two separate 40 s runs of the same command
# differed by up to 6% here, more than the cost itself; alternating steps in one process cancels the drift.
bench_step=(build/bench_step recipes/shakespeare_char.toml "${common[@]}" "${shape_b[@]}" --pairs "$pairs"
            --with loss.dispersion.enabled=true)
cost() {
  local r
  r=$("${bench_step[@]}" "$@")
  json_field "$r" cost_pct
}
c=$(cost)
echo "dispersion (last layer) step-time cost on B: ${c}% (median of per-pair ratios, $pairs alternating pairs)"
c=$(cost --with loss.dispersion.layers=all)
echo "dispersion (all layers) step-time cost on B: ${c}%"
bf16_vs_fp32
if [[ "${THREADS_SWEEP:-0}" == 1 ]]; then
  for t in 1 2; do
    r=$(measure a_t$t "${shape_a[@]}" --set run.threads=$t)
    read -r tps mfu rss <<<"$r"
    row "spread A threads=$t/$t" "$tps" "$mfu" "$rss" "-"
  done
fi
