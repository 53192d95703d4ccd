#!/usr/bin/env bash
# The Python environment that judges spread: the reference libraries (tokenizers, transformers,
# sentence-transformers, PyLate, SciPy) for the tests and checks, and today's PyTorch as the peer in benchmarks.
# Python is never part of spread itself; nothing in the build or the CLI needs it.
#
#   scripts/python_env.sh            # makes (or reuses) the environment, prints its python's path last
#   scripts/python_env.sh --peers    # the second one: the newest peers where the first holds one back
#
# Where: $SPREAD_VENV, else .venv/ in the repository (git-ignored). Versions: scripts/python-requirements.txt,
# pinned; the environment is reused while that file is unchanged (its hash is kept in the environment), and
# remade when it changes. PyLate 1.6, the newest, pins sentence-transformers 5.3 (and, through fast-plaid, torch
# 2.11), so the first environment cannot hold today's sentence-transformers 6 and torch: --peers makes
# $SPREAD_PEERS_VENV, else .venv-peers/, from scripts/python-requirements-peers.txt (sentence-transformers 6.3
# with its training extras, torch 2.15), for the benchmarks that compare against them; no test needs it. pip's own cache makes a remake in a fresh clone a local install, not a download.
# Exit 1 with one line when it cannot be made (no python3 venv, the package index unreachable): tests that need it
# then skip, saying so.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${SPREAD_VENV:-$root/.venv}"
requirements="$root/scripts/python-requirements.txt"
if [[ "${1:-}" == --peers ]]; then
  venv="${SPREAD_PEERS_VENV:-$root/.venv-peers}"
  requirements="$root/scripts/python-requirements-peers.txt"
fi
stamp="$venv/.spread-requirements.sha256"
want="$(sha256sum "$requirements" | cut -d' ' -f1)"

# One maker at a time: a second caller (another clone's tests, a parallel job) waits here, then reuses it.
mkdir -p "$(dirname "$venv")"
exec 9> "$venv.lock"
flock 9
if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  echo "$venv/bin/python"
  exit 0
fi
python="$(command -v python3 || true)"
if [[ -z "$python" ]] || ! "$python" -m venv --help > /dev/null 2>&1; then
  echo "python_env: no python3 with the venv module (Debian: apt-get install python3-venv)" >&2
  exit 1
fi
rm -rf "$venv"
"$python" -m venv "$venv"
log="$(mktemp)"
echo "python_env: installing scripts/$(basename "$requirements") into $venv (a few minutes the first time)" >&2
if ! "$venv/bin/pip" install --disable-pip-version-check -q -r "$requirements" > "$log" 2>&1; then
  reason="$(grep -m1 -E 'ERROR|error' "$log" || tail -1 "$log")"
  rm -rf "$venv"
  echo "python_env: pip could not install the pinned packages (is the package index reachable?): $reason" >&2
  rm -f "$log"
  exit 1
fi
rm -f "$log"
echo "$want" > "$stamp"
echo "$venv/bin/python"
