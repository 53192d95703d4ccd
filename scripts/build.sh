#!/usr/bin/env bash
# Configures and builds spread (Release) in ./build. Extra arguments go to `cmake --build` (e.g. --target spread).
# With ccache installed (scripts/install_deps.sh --optional adds it), compiles go through it, so that rebuilding a
# build folder after a clean or a branch switch takes seconds per file instead of the ~16 s of a LibTorch TU.
# (Measured: it does not help a clone in another folder: the precompiled header embeds the build folder's path,
# so every file that uses it misses.)
set -euo pipefail
cd "$(dirname "$0")/.."
launcher=()
if command -v ccache > /dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  # The precompiled header is remade by every build: ccache may reuse it (and what uses it) only when its
  # timestamps are not part of the key.
  export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
  export CCACHE_BASEDIR=/
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
cmake --build build -j"$(nproc)" "$@"
