#!/usr/bin/env bash
# The tests of files from outside (model folders, tokenizers, data files, outputs) under AddressSanitizer and
# UndefinedBehaviorSanitizer: builds ./build-asan (scripts/build.sh --sanitize) and runs those suites from it.
# Extra arguments go to the test binary; SPREAD_SANITIZE_FILTER replaces the list of suites below.
# LibTorch is not instrumented: a defect inside it shows only where spread's own code touches the memory.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh --sanitize --target spread_tests
# Leaks are not checked: LibTorch keeps its registries and thread pools to the end of the process. Container
# overflow is not either: uninstrumented LibTorch fills std::vectors without the annotations ASan checks.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:detect_container_overflow=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
suites='UntrustedInput JsonDepth Safetensors HfImportBadFolder HfBadInput HfComponents CharTokenizer ExportTokenizer
        Npy Pairs JsonlPairs Csv Tsv Beir Sick Sts Stsb Utf8 BadRows Recipe SetOverrides TextStream InputErrors
        InputFiles SmallInputs LongLines ReliabilityOutputs FuzzCorpus'
filter=$(echo $suites | sed 's/\([A-Za-z]*\)/\1.*/g; s/ /:/g')
exec build-asan/spread_tests --gtest_filter="${SPREAD_SANITIZE_FILTER:-$filter}" "$@"
