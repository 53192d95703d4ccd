#!/usr/bin/env bash
# Configures and builds spread (Release) in ./build. Extra arguments go to `cmake --build` (e.g. --target spread).
# With ccache installed (scripts/install_deps.sh --optional adds it), compiles go through it: a fresh clone on a
# machine that built spread before (CI's, a second worktree) then rebuilds in a fraction of the ~20 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
launcher=()
if command -v ccache > /dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  # The precompiled header is rebuilt in every clone: ccache may reuse it (and what uses it) only when its
  # timestamps are not part of the key; base_dir makes the clone's absolute paths relative, so clones share hits.
  export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
  export CCACHE_BASEDIR=/
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
cmake --build build -j"$(nproc)" "$@"
