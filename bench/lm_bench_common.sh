# Sourced by bench/bench_lm.sh and bench/bench_lm_peers.sh: the data, the two shapes (spread's recipe keys
# and nanoGPT's flags), the matmul peaks of this run, measure() of one `spread train` run and peer_json() of one
# nanoGPT-style PyTorch run.
# Sets: data out peak bf16_peak (and harness, json_field) ref_env common shape_a shape_b ref_a ref_b steps_a steps_b pairs.
# SPREAD_BUILD: the build folder whose spread is measured (default build; build-libtorch2 for the LibTorch 2.x one,
# made by scripts/build.sh --libtorch=pip first).
set -euo pipefail
shopt -s inherit_errexit  # a failing command inside $(...) stops the script too
data="${1:-${SPREAD_DATA:-../shared/data}/tinyshakespeare/input.txt}"
[[ -f "$data" ]] || { echo "no data file $data (pass one as the first argument)"; exit 2; }
spread_build=${SPREAD_BUILD:-build}
[[ $spread_build == build ]] && scripts/build.sh --target spread bench_matmul bench_step >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
steps_a=${STEPS_A:-500} steps_b=${STEPS_B:-40} pairs=${PAIRS:-16}

harness() { python3 bench/harness.py "$@"; }  # medians, ratios, JSON lines (bench/harness.py)
json_field() { harness field "$1" "$2"; }  # KEY of the last JSON line of a command's output
matmul=$("$spread_build"/bench_matmul)
peak=$(json_field "$matmul" matmul_peak_gflops)
bf16_peak=$(json_field "$matmul" bf16_matmul_peak_gflops)
echo "matmul peak: ${peak} GFLOP/s ($(json_field "$matmul" blas) $(json_field "$matmul" threading)," \
     "core $(json_field "$matmul" core), $(json_field "$matmul" origin)); bf16 (oneDNN): ${bf16_peak} GFLOP/s"
# The reference runs under the same BLAS core: the one spread chose itself, if it did.
ref_env=()
[[ "$(json_field "$matmul" origin)" == "spread (auto"* ]] && ref_env=(OPENBLAS_CORETYPE="$(json_field "$matmul" core)")

common=(--set run.out_dir="$out" --set data.source=text --set data.path="$data" --set tokenizer.kind=char
        --set train.eval_every=0 --set train.ckpt_every=0 --set train.log_every=5 --set model.dropout=0.0
        --set train.warmup_steps=5)
shape_a=(--set model.n_layer=4 --set model.n_head=4 --set model.n_embd=128 --set model.block_size=64
         --set train.batch_size=12 --set train.max_steps="$steps_a")
shape_b=(--set model.n_layer=6 --set model.n_head=6 --set model.n_embd=384 --set model.block_size=256
         --set train.batch_size=8 --set train.max_steps="$steps_b")
ref_a=(--n-layer 4 --n-head 4 --n-embd 128 --block 64 --batch 12 --steps "$steps_a")
ref_b=(--n-layer 6 --n-head 6 --n-embd 384 --block 256 --batch 8 --steps "$steps_b")

# The JSON line of one bench/nanogpt_ref.py run: peer_json SHAPE DTYPE MODE (MODE eager | compiled), with
# peer_extra_a / peer_extra_b (a script's own model flags, e.g. --llama) after the shape's flags. Needs peer_python
# and compile_warmup; the error names `peer_name`.
peer_extra_a=() peer_extra_b=() peer_name=nanoGPT
peer_json() {
  local args=("${ref_a[@]}" "${peer_extra_a[@]}")
  [[ $1 == B ]] && args=("${ref_b[@]}" "${peer_extra_b[@]}")
  args+=(--dtype "$2")
  if [[ $3 == compiled ]]; then
    args+=(--compile --warmup-steps "$compile_warmup")
    # Shape B's 40 steps leave too few windows after the compile: 20 more.
    [[ $1 == B ]] && args+=(--steps $((steps_b + 20)))
  fi
  env "${ref_env[@]}" "$peer_python" bench/nanogpt_ref.py "$data" "${args[@]}" 2>"$out/peer.err" ||
    { echo "$peer_name $* failed: $(tail -3 "$out/peer.err")" >&2; return 1; }
}

# Median tokens/s over the logged windows after the first (warm-up), MFU and peak RSS of one run.
measure() {
  local name=$1; shift
  "$spread_build"/spread train recipes/shakespeare_char.toml --set run.name="$name" "${common[@]}" "$@" >"$out/$name.log"
  python3 - "$out/$name" "$peak" <<'PY'
import json, statistics, sys, tomllib
run, peak = sys.argv[1], float(sys.argv[2])
lines = [json.loads(l) for l in open(run + "/metrics.jsonl")]
tps = [l["tokens_per_s"] for l in lines if "tokens_per_s" in l and l["step"] > 5]
n = json.load(open(run + "/run.json"))["parameters"]
rec = tomllib.load(open(run + "/recipe.toml", "rb"))["model"]
flops = 6 * n + 12 * rec["n_layer"] * rec["n_embd"] * rec["block_size"]
end = [l for l in lines if l.get("event") == "end"][0]
t = statistics.median(tps)
print(f'{t:.0f} {100 * t * flops / (peak * 1e9):.1f} {end["peak_rss_mib"]:.0f}')
PY
}

