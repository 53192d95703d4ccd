#!/usr/bin/env bash
# Configures and builds spread (Release) in ./build. Extra arguments go to `cmake --build` (e.g. --target spread).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" "$@"
