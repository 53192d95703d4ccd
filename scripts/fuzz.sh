#!/usr/bin/env bash
# Fuzzes spread's readers of files from outside with libFuzzer (tests/fuzz/fuzz_targets.h; docs/untrusted_input.md).
#   scripts/fuzz.sh [TARGET|all] [SECONDS]  fuzz TARGET (default: all, one after another) for SECONDS each
#                                           (default 60), from its committed corpus plus what earlier runs found
#   scripts/fuzz.sh --list                  the targets: name, input bound (bytes), memory bound (MB), what it reads
#   scripts/fuzz.sh --replay                every committed corpus file once through the fuzz build (seconds)
#   scripts/fuzz.sh --merge TARGET          add the inputs of build-fuzz/corpus/TARGET that reach new code to the
#                                           committed corpus (libFuzzer's -merge=1: a minimal set, commit them)
#   scripts/fuzz.sh --seeds                 regenerate the committed seeds (tests/fuzz/make_seeds.py, with the
#                                           reference environment and the built spread)
# Each input must be read or refused with a UserError within 1 s, under AddressSanitizer and UndefinedBehavior-
# Sanitizer, with no single allocation above the target's bound and at most 2 GB of RSS; anything else is a crash,
# saved as build-fuzz/crashes/TARGET-*: fix it, then add the file to tests/fuzz/corpus/TARGET/ as crash_NAME, where
# the ordinary test suite replays it (tests/test_fuzz_corpus.cpp). One line per run goes to build-fuzz/fuzz_runs.jsonl
# (target, seconds, executions, coverage, crashes). Builds build-fuzz (scripts/build.sh --fuzz) first.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh --fuzz
scripts/build.sh --fuzz --target spread_fuzz > /dev/null
fuzz=build-fuzz/spread_fuzz
corpus=tests/fuzz/corpus
# LibTorch keeps its allocations to the end of the process (no leak checks); uninstrumented LibTorch fills vectors
# without ASan's container annotations.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:detect_container_overflow=0:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TMPDIR=${SPREAD_FUZZ_TMPDIR:-/dev/shm}  # the scratch files of each input, in memory
export OMP_NUM_THREADS=1

target_field() { "$fuzz" --list | awk -v t="$1" -v f="$2" '$1 == t { sub(":", "", $3); print $f }'; }

case "${1:-all}" in
  --list) exec "$fuzz" --list ;;
  --seeds)
    scripts/build.sh --target spread > /dev/null
    exec "$(scripts/python_env.sh | tail -1)" tests/fuzz/make_seeds.py build/spread ;;
  --replay)
    for target in $("$fuzz" --list | cut -d' ' -f1); do
      echo "== $target"
      log="build-fuzz/replay_$target.log"
      SPREAD_FUZZ_TARGET=$target "$fuzz" -runs=0 -timeout=10 -rss_limit_mb=2048 \
        -malloc_limit_mb="$(target_field "$target" 3)" "$corpus/$target" > "$log" 2>&1 ||
        { grep -E "broken contract|ERROR|SUMMARY" "$log" >&2; echo "fuzz.sh: $target failed on its corpus ($log)" >&2; exit 1; }
      grep -E "INFO: seed corpus|^Done" "$log"
    done
    exit 0 ;;
  --merge)
    target=${2:?"--merge TARGET"}
    SPREAD_FUZZ_TARGET=$target "$fuzz" -merge=1 -timeout=5 -max_len="$(target_field "$target" 2)" \
      "$corpus/$target" "build-fuzz/corpus/$target"
    exit 0 ;;
esac

targets=${1:-all}
seconds=${2:-60}
[[ "$targets" == all ]] && targets=$("$fuzz" --list | cut -d' ' -f1)
mkdir -p build-fuzz/crashes
for target in $targets; do
  max_len=$(target_field "$target" 2)
  [[ -n "$max_len" ]] || { echo "fuzz.sh: no target '$target' (scripts/fuzz.sh --list)" >&2; exit 2; }
  mkdir -p "build-fuzz/corpus/$target"
  log="build-fuzz/fuzz_$target.log"
  echo "== $target: $seconds s (log: $log)"
  set +e
  # -fork=1 with -ignore_*: a crash, timeout or out-of-memory is saved and the run goes on, so that one run finds
  # more than one defect. Progress: libFuzzer's status line (executions, coverage, crashes, seconds) every ~30 s.
  SPREAD_FUZZ_TARGET=$target "$fuzz" -max_total_time="$seconds" -max_len="$max_len" -timeout=1 -rss_limit_mb=2048 \
    -malloc_limit_mb="$(target_field "$target" 3)" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
    -artifact_prefix="build-fuzz/crashes/$target-" "build-fuzz/corpus/$target" "$corpus/$target" > "$log" 2>&1 &
  fuzzer=$!
  for ((tick = 1; ; ++tick)); do
    sleep 5
    kill -0 "$fuzzer" 2> /dev/null || break
    ((tick % 6)) || grep -E "^#[0-9]+:" "$log" | tail -1 | sed "s/^/  $target /"
  done
  wait "$fuzzer"
  status=$?
  set -e
  last=$(grep -E "^#[0-9]+:" "$log" | tail -1 || true)
  execs=$(sed -E 's/^#([0-9]+):.*/\1/' <<< "$last")
  cov=$(grep -oE "cov: [0-9]+" <<< "$last" | awk '{print $2}' || true)
  failures=$(grep -oE "oom/timeout/crash: [0-9/]+" <<< "$last" | awk '{print $2}' || true)
  crashes=$(find build-fuzz/crashes -name "$target-*" | wc -l)
  printf '{"target": "%s", "seconds": %s, "executions": %s, "coverage": %s, "oom/timeout/crash": "%s", "saved": %s, "exit": %s, "date": "%s", "commit": "%s"}\n' \
    "$target" "$seconds" "${execs:-0}" "${cov:-0}" "${failures:-?}" "$crashes" "$status" "$(date -u +%FT%TZ)" \
    "$(git rev-parse --short HEAD)" |
    tee -a build-fuzz/fuzz_runs.jsonl
done
