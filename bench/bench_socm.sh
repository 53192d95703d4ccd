#!/usr/bin/env bash
# SOCM benchmark: all 499,500 pairs of 1,000 random texts of 24-64 tokens on 2 threads, at
# d = 256 (target: 10 s) and d = 1024 (target: at most 3x the d = 256 time: the width-dependent part is
# one GEMM), with peak RSS (target: under 1 GiB). Builds bench_socm in ./build when it is missing; BUILD=dir uses
# another build. Extra arguments go to both runs (e.g. --texts 300 for a quick look, --solver svd for the slow
# reference path, --peak for the GEMM rate against a plain sgemm/dgemm). The BLAS runs on 2 threads as well.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${BUILD:-build}"
if [[ ! -x "$build/bench_socm" ]]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" -j"$(nproc)" --target bench_socm
fi

declare -A seconds
for dim in 256 1024; do
  echo "== d = $dim"
  out=$(OPENBLAS_NUM_THREADS=2 "$build/bench_socm" --dim "$dim" --threads 2 "$@")
  echo "$out" | grep -v '^RESULT'
  seconds[$dim]=$(echo "$out" | sed -n 's/^RESULT .*total_s=\([0-9.]*\).*/\1/p')
done
ratio=$(python3 bench/harness.py ratio --digits 2 "${seconds[1024]}" "${seconds[256]}")
echo "== d = 1024 costs ${ratio}x d = 256 (target <= 3x)"
