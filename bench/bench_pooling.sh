#!/usr/bin/env bash
# Ward token pooling benchmark: 64 documents of 180 tokens at d = 128, pool factor 4, one thread
# (target: under 25 ms), against PyLate's pool_embeddings_hierarchical and SciPy's Ward linkage on the same vectors
# (bench/bench_pooling_peer.py; target: spread >= 1.25x); then a pooling-aware MaxSim training step against a plain one (bench_maxsim_step: 16
# queries x 1 document, 4 layers, width 256, head 128; target: at most 1.35x), timed in alternating pairs.
# STEP_ARGS passes options to bench_maxsim_step (e.g. "--threads 1 --pairs 20"). Builds bench_pooling in ./build when it is missing; BUILD=dir uses another build.
# Extra arguments go to bench_pooling (e.g. --threads 2, --tokens 300). On a shared machine run it under
# `nice -n 19` and read the CPU time next to the wall time: the load average it prints says how busy it was.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${BUILD:-build}"
if [[ ! -x "$build/bench_pooling" || ! -x "$build/bench_maxsim_step" ]]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" -j"$(nproc)" --target bench_pooling bench_maxsim_step
fi
save=$(mktemp -d)
trap 'rm -rf "$save"' EXIT
out=$("$build/bench_pooling" --save "$save" "$@")
echo "$out" | grep -v '^RESULT'
median=$(echo "$out" | sed -n 's/^RESULT median_ms=\([0-9.]*\).*/\1/p')
echo "== median ${median} ms per 64-document call (target < 25 ms with the default arguments)"
# The peers on the same vectors: PyLate's hierarchical pooling and SciPy's Ward linkage, one thread.
# (With other --tokens or --pool-factor arguments, PEER_ARGS passes the same ones to the peer.)
if python=$(scripts/python_env.sh 2>/dev/null | tail -1); then
  peer=$("$python" bench/bench_pooling_peer.py "$save" ${PEER_ARGS:---tokens 180 --pool-factor 4})
  echo "$peer" | grep -v '^{'
  python3 - "$median" "$(tail -1 <<<"$peer")" <<'PY'
import json, sys
m, p = float(sys.argv[1]), json.loads(sys.argv[2])
print(f"== spread / PyLate: {p['pylate_median_ms'] / m:.2f}x, spread / SciPy linkage alone: "
      f"{p['scipy_median_ms'] / m:.2f}x (target >= 1.25x; same clusters in {p['same_partition']} of "
      f"{p['documents']} documents)")
PY
else
  echo "(no Python environment for the PyLate / SciPy peers: scripts/python_env.sh failed)"
fi
step=$("$build/bench_maxsim_step" ${STEP_ARGS:-})
echo "$step" | grep -v '^RESULT'
ratio=$(echo "$step" | sed -n 's/^RESULT ratio=\([0-9.]*\).*/\1/p')
echo "== pooling-aware / plain MaxSim step: x${ratio} (target <= 1.35)"
