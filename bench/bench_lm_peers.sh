#!/usr/bin/env bash
# spread against nanoGPT on today's PyTorch (the pinned torch of scripts/python_env.sh, its MKL and
# oneDNN, as a user installs it with pip), on bench_lm.sh's shapes and data (char vocabulary of tiny shakespeare):
#   A fp32   spread float32           against nanoGPT eager and torch.compile, float32
#   B fp32   spread float32           against the same
#   B bf16   spread train.precision=bf16  against nanoGPT under torch.autocast("cpu", bfloat16), eager and compiled
# Same threads (both use every core: spread's run.threads = 0, torch's default), the same tokens per step and
# dropout 0. ROUNDS rounds (default 2), the peers first in odd rounds and spread first in even ones, so each ratio
# is measured within minutes. Three tables: the ratio of the sums of tokens/s over the rounds, the best round of
# each side, and the paired one: the median of the per-round ratios with their range. Target: >= 1.25x.
# Usage: bench/bench_lm_peers.sh [DATA_FILE]    (PEER_PYTHON: another Python with torch >= 2;
#        CASES: a comma-separated subset of "A float32,B float32,B bfloat16", e.g. CASES="B bfloat16";
#        BENCH_JSONL: where each round is appended as one JSON line, /tmp/spread_bench_lm_peers.jsonl by default,
#        so that rounds of several runs of the same commit can be pooled)
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
source bench/lm_bench_common.sh "$@"

peer_python=${PEER_PYTHON:-$(scripts/python_env.sh | tail -1)}
echo "peer: nanoGPT on $("$peer_python" -c 'import torch; print("torch", torch.__version__, "threads",
  torch.get_num_threads())')"
compile_warmup=${COMPILE_WARMUP:-10}  # steps before the first timed window of a compiled peer (its compile time)

# tokens/s of one nanoGPT run: peer SHAPE DTYPE MODE
peer() {
  local r
  r=$(peer_json "$@")
  printf '%.0f\n' "$(json_field "$r" tokens_per_s)"
}
# tokens/s of one spread run: mine SHAPE DTYPE ROUND
mine() {
  local args=("${shape_a[@]}")
  [[ $1 == B ]] && args=("${shape_b[@]}")
  [[ $2 == bfloat16 ]] && args+=(--set train.precision=bf16)
  local tps mfu rss
  read -r tps mfu rss <<<"$(measure "$1_$2_$3" "${args[@]}")"
  echo "$tps"
}

IFS=, read -r -a cases <<<"${CASES:-A float32,B float32,B bfloat16}"
declare -A sum best values
jsonl=${BENCH_JSONL:-/tmp/spread_bench_lm_peers.jsonl}
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
# The best round of each side besides the mean: on a VM whose vCPUs slow down in stretches (docs/benchmarks.md,
# "This VM's speed is bimodal") one side's run can fall in a slow stretch and the other's not.
keep_best() { (( $2 > ${best[$1]:-0} )) && best[$1]=$2; return 0; }
for round in $(seq "${ROUNDS:-2}"); do
  for c in "${cases[@]}"; do
    read -r shape dtype <<<"$c"
    key="${shape}_${dtype}"
    if ((round % 2 == 1)); then
      e=$(peer "$shape" "$dtype" eager); p=$(peer "$shape" "$dtype" compiled); s=$(mine "$shape" "$dtype" "$round")
    else
      s=$(mine "$shape" "$dtype" "$round"); p=$(peer "$shape" "$dtype" compiled); e=$(peer "$shape" "$dtype" eager)
    fi
    printf 'round %d  %-11s spread %7d  nanoGPT eager %7d  compiled %7d tokens/s\n' "$round" "$c" "$s" "$e" "$p"
    sum[${key}_s]=$(( ${sum[${key}_s]:-0} + s ))
    sum[${key}_e]=$(( ${sum[${key}_e]:-0} + e ))
    sum[${key}_p]=$(( ${sum[${key}_p]:-0} + p ))
    keep_best "${key}_s" "$s"; keep_best "${key}_e" "$e"; keep_best "${key}_p" "$p"
    values[${key}_s]+=" $s" values[${key}_e]+=" $e" values[${key}_p]+=" $p"
    printf '{"commit": "%s", "case": "%s", "round": %d, "spread": %d, "eager": %d, "compiled": %d}\n' \
      "$commit" "$c" "$round" "$s" "$e" "$p" >>"$jsonl"
  done
done
printf '\n| case | spread tokens/s | nanoGPT eager | nanoGPT compiled | spread / eager | spread / compiled |\n'
printf '|---|---:|---:|---:|---:|---:|\n'
n=${ROUNDS:-2}
for c in "${cases[@]}"; do
  read -r shape dtype <<<"$c"
  key="${shape}_${dtype}"
  python3 - "$c" "${sum[${key}_s]}" "${sum[${key}_e]}" "${sum[${key}_p]}" "$n" <<'PY'
import sys
case, s, e, p, n = sys.argv[1], *map(int, sys.argv[2:5]), int(sys.argv[5])
print(f"| {case} | {s / n:,.0f} | {e / n:,.0f} | {p / n:,.0f} | {s / e:.2f}x | {s / p:.2f}x |")
PY
done
printf '\nBest round of each (tokens/s):\n\n| case | spread | nanoGPT eager | nanoGPT compiled | spread / eager | spread / compiled |\n'
printf '|---|---:|---:|---:|---:|---:|\n'
for c in "${cases[@]}"; do
  read -r shape dtype <<<"$c"
  key="${shape}_${dtype}"
  python3 - "$c" "${best[${key}_s]}" "${best[${key}_e]}" "${best[${key}_p]}" <<'PY'
import sys
case, s, e, p = sys.argv[1], *map(int, sys.argv[2:5])
print(f"| {case} | {s:,} | {e:,} | {p:,} | {s / e:.2f}x | {s / p:.2f}x |")
PY
done
printf '\nPaired: the median of the per-round ratios (their range):\n\n'
for c in "${cases[@]}"; do
  read -r shape dtype <<<"$c"
  key="${shape}_${dtype}"
  for peer in eager compiled; do
    harness paired --no-table --digits 2 --bench bench_lm_peers --case "$c" --unit tokens/s --a-label spread \
      --b-label "nanoGPT $peer" --a "${values[${key}_s]}" --b "${values[${key}_${peer:0:1}]}"
  done
done
echo "(load average $(cut -d' ' -f1-3 /proc/loadavg); target: spread >= 1.25x each peer; rounds appended to $jsonl)"
