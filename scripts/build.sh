#!/usr/bin/env bash
# Configures and builds spread (Release) in ./build. Extra arguments go to `cmake --build` (e.g. --target spread).
# With ccache installed (scripts/install_deps.sh --optional adds it), compiles go through it, so that rebuilding a
# build folder after a clean or a branch switch takes seconds per file instead of the ~16 s of a LibTorch TU.
# It helps a rebuild of the same folder only. No compile definition holds a path of the clone any more (the shim's
# folder goes to its one user, the tests' paths are in one generated file), yet a fresh clone beside a warm cache
# still missed every file (measured 2026-12-02: 0 hits in its first 22 compiles): the precompiled header that
# every file includes is itself rebuilt in each folder, and ccache hashes its bytes, which hold the folder's paths.
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
# Ninja when installed (a new build folder only: an existing one keeps its generator). Unlike CMake's Makefiles,
# which rewrite every object's flags file when a source is added, it rebuilds only what changed.
generator=()
if [[ ! -f build/CMakeCache.txt ]] && command -v ninja > /dev/null; then
  generator=(-G Ninja)
fi
cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
cmake --build build -j"$(nproc)" "$@"
