#!/usr/bin/env bash
# Installs what is missing (chromium too, for the report's browser check), builds everything and runs ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh --optional
scripts/build.sh
cd build
ctest --output-on-failure -j"$(nproc)" --timeout 600
