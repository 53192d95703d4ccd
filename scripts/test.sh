#!/usr/bin/env bash
# Installs what is missing (chromium too, for the report's browser check; ccache), makes the Python environment of
# the reference libraries that the equivalence tests judge against (scripts/python_env.sh; when it cannot be made,
# those tests skip and say why), builds everything and runs ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh --optional
scripts/python_env.sh > /dev/null || echo "note: no reference Python environment; the tests that need it will be skipped"
scripts/build.sh
cd build
ctest --output-on-failure -j"$(nproc)" --timeout 600
