#!/usr/bin/env bash
# Installs what is missing (chromium too, for the report's browser check; node and npm for the tokenizer.json
# check), builds everything and runs ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh --optional
scripts/build.sh
# The JavaScript tokenizers that check exported tokenizer.json files (tests/test_export.cpp skips that check
# without them): from npm, into build/node_modules.
if command -v npm > /dev/null; then
  npm install --prefix build --no-audit --no-fund --silent @huggingface/tokenizers@0.2.0 ||
    echo "note: @huggingface/tokenizers not installed; the tokenizer.json check will be skipped"
fi
cd build
ctest --output-on-failure -j"$(nproc)" --timeout 600
