#!/usr/bin/env bash
# Dispersion lambda sweep (SPEC.md section 2): the same data, seed and steps with lambda = 0 (baseline, penalty
# only logged), 0.1, 0.5 and 1.0; then `spread compare` of the runs. About 22 minutes on 2 cores (5-6 minutes per run).
# Usage: scripts/exp_dispersion.sh [extra --set overrides for every run]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh --target spread >/dev/null
out=checkpoints/exp_dispersion
stamp=$(date +%Y%m%d-%H%M%S)
runs=()
tokenizer=()
for lambda in ${LAMBDAS:-0 0.1 0.5 1.0}; do
  name="lambda_${lambda}_${stamp}"
  build/spread train recipes/dispersion_wordnet.toml --set run.name="$name" --set run.out_dir="$out" \
    --set loss.dispersion.lambda="$lambda" "${tokenizer[@]}" "$@"
  runs+=("$out/$name")
  # Every run after the first reuses the first run's tokenizer (same data and seed would give the same model,
  # but training it once saves time).
  tokenizer=(--set tokenizer.model="${runs[0]}/tokenizer.model")
done
build/spread compare --markdown "${runs[@]}"
