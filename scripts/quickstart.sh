#!/usr/bin/env bash
# Installs what is missing, builds spread and trains the quickstart recipe (a small GPT on WordNet's glosses),
# then writes the run's HTML report. Extra arguments go to `spread train` (e.g. --set train.max_steps=100).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh --target spread
name="quickstart-$(date +%Y%m%d-%H%M%S)"
./build/spread train recipes/quickstart.toml --set "run.name=$name" "$@"
./build/spread report "checkpoints/$name"
