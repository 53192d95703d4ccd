#!/usr/bin/env bash
# Installs the Debian 12 packages spread needs, only those missing. `--optional` adds chromium (the report's browser
# test) and python3-venv (the reference environment); `--fuzz` clang and its libFuzzer runtime (scripts/fuzz.sh). ccache and ninja are required, not optional: they decide the
# build folder's compiler launcher and generator, so the quickstart's build and the test command's build must see
# the same ones, or the second command rebuilds every object (and ccache lets a fresh clone reuse earlier compiles).
set -euo pipefail

required=(build-essential cmake pkg-config libtorch-dev libsentencepiece-dev libeigen3-dev libfmt-dev
          libcxxopts-dev libtomlplusplus-dev nlohmann-json3-dev libicu-dev zlib1g-dev libgtest-dev libgloo-dev
          libopenblas0-pthread libopenblas0-openmp libjemalloc-dev libdnnl-dev wordnet-base
          python3-torch python3-numpy ccache ninja-build)
optional=(chromium python3-venv)

fuzzing=(clang libclang-rt-14-dev)

wanted=("${required[@]}")
for arg in "$@"; do
  case "$arg" in
    --optional) wanted+=("${optional[@]}") ;;
    --fuzz) wanted+=("${fuzzing[@]}") ;;
    *) echo "install_deps.sh: unknown option $arg (--optional, --fuzz)" >&2; exit 2 ;;
  esac
done

missing=()
for pkg in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "installing: ${missing[*]}"
sudo_cmd=()
[[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
"${sudo_cmd[@]}" apt-get update -q
# Optional packages may be unavailable (e.g. no chromium on a minimal mirror): try them separately.
req_missing=() opt_missing=()
for pkg in "${missing[@]}"; do
  if [[ " ${optional[*]} " == *" $pkg "* ]]; then opt_missing+=("$pkg"); else req_missing+=("$pkg"); fi
done
[[ ${#req_missing[@]} -gt 0 ]] && DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${req_missing[@]}"
if [[ ${#opt_missing[@]} -gt 0 ]]; then
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${opt_missing[@]}" ||
    echo "note: optional packages not installed (${opt_missing[*]}); the checks that need them will be skipped"
fi
