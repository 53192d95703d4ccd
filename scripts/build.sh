#!/usr/bin/env bash
# Configures and builds spread (Release). Extra arguments go to `cmake --build` (e.g. --target spread).
#   scripts/build.sh                  # against Debian's LibTorch 1.13 (libtorch-dev), in ./build: the default
#   scripts/build.sh --libtorch=pip   # against the LibTorch 2.x inside the reference environment's torch wheel
#                                     # (scripts/python_env.sh; CUDA-enabled, runs on the CPU without a GPU), in
#                                     # ./build-libtorch2
#   scripts/build.sh --libtorch=DIR   # against the LibTorch whose CMake prefix is DIR (an unpacked libtorch/, or
#                                     # a torch package folder), in ./build-libtorch2 (SPREAD_BUILD_DIR overrides)
#   scripts/build.sh --sanitize       # AddressSanitizer + UndefinedBehaviorSanitizer (optimised, with debug info),
#                                     # against Debian's LibTorch, in ./build-asan; run the readers' tests with
#                                     # scripts/test_sanitize.sh (LibTorch itself is not instrumented)
#   scripts/build.sh --fuzz           # the libFuzzer targets (clang, ASan + UBSan + coverage) in ./build-fuzz:
#                                     # build-fuzz/spread_fuzz, run by scripts/fuzz.sh (tests/fuzz/fuzz_targets.h)
# With ccache installed (scripts/install_deps.sh installs it), compiles go through it, so that rebuilding a
# build folder after a clean or a branch switch takes seconds per file instead of the ~16 s of a LibTorch TU.
# It helps a rebuild of the same folder only. No compile definition holds a path of the clone any more (the shim's
# folder goes to its one user, the tests' paths are in one generated file), yet a fresh clone beside a warm cache
# still missed every file (measured 2026-12-02: 0 hits in its first 22 compiles): the precompiled header that
# every file includes is itself rebuilt in each folder, and ccache hashes its bytes, which hold the folder's paths.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
prefix=()
build_type=Release
sanitize=()
if [[ "${1:-}" == --sanitize ]]; then
  shift
  build=build-asan
  build_type=RelWithDebInfo
  sanitize=(-DSPREAD_SANITIZE=ON)
elif [[ "${1:-}" == --fuzz ]]; then
  shift
  build=build-fuzz
  build_type=RelWithDebInfo
  # libFuzzer is clang's (Debian's clang-14 with libclang-rt-14-dev); gcc has no coverage-guided fuzzer.
  command -v clang++ > /dev/null || { echo "build.sh: --fuzz needs clang++ (apt-get install clang)" >&2; exit 2; }
  export CXX=clang++
  sanitize=(-DSPREAD_FUZZ=ON)
elif [[ "${1:-}" == --libtorch=* ]]; then
  libtorch=${1#--libtorch=}
  shift
  build=build-libtorch2
  if [[ "$libtorch" == pip ]]; then
    python=$(scripts/python_env.sh | tail -1)
    libtorch=$("$python" -c 'import os, torch; print(os.path.dirname(torch.__file__))')
  fi
  # The package folder itself: with torch.utils.cmake_prefix_path (its share/cmake), TorchConfig searched the
  # system first and linked Debian's libtorch.so 1.13 under the wheel's headers (seen here).
  [[ "$libtorch" == */share/cmake ]] && libtorch=${libtorch%/share/cmake}
  if [[ "$libtorch" != debian ]]; then
    [[ -n "$(find "$libtorch" -name TorchConfig.cmake -print -quit 2>/dev/null)" ]] ||
      { echo "build.sh: $libtorch holds no TorchConfig.cmake: not the CMake prefix of a LibTorch" >&2; exit 2; }
    prefix=(-DCMAKE_PREFIX_PATH="$libtorch")
  else
    build=build
  fi
fi
build=${SPREAD_BUILD_DIR:-$build}
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
if [[ ! -f $build/CMakeCache.txt ]] && command -v ninja > /dev/null; then
  generator=(-G Ninja)
fi
cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE="$build_type" "${prefix[@]}" "${sanitize[@]}" \
  "${launcher[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)" "$@"
