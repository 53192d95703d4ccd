#!/usr/bin/env bash
# spread against LibTorch 2.x: the one inside the reference environment's torch wheel (scripts/python_env.sh;
# CUDA-enabled, and it runs on the CPU of a machine without a GPU). Builds ./build-libtorch2 (scripts/build.sh
# --libtorch=pip), prints what the build sees (spread info), and runs its test suite.
#   scripts/test_libtorch2.sh              # the whole suite
#   scripts/test_libtorch2.sh -R REGEX     # the tests whose names match (other ctest options work too)
# Exit 2 with one line when there is no environment (so no wheel) to build against; else ctest's exit code.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! scripts/python_env.sh > /dev/null; then
  echo "test_libtorch2: no reference Python environment, so no torch wheel to build against; nothing was built" >&2
  exit 2
fi
scripts/build.sh --libtorch=pip
cd build-libtorch2
./spread info
ctest --output-on-failure -j"$(nproc)" --timeout 600 "$@"
