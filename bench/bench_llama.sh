#!/usr/bin/env bash
# spread's Llama-style block on bench_lm.sh's shapes A and B and data (char vocabulary of tiny
# shakespeare), dropout 0, the same tokens per step and threads everywhere:
#   (a) against spread's GPT block of equal parameters, float32. The Llama arm has positions = "rope",
#       norm = "rmsnorm", mlp = "swiglu", n_kv_head = n_head / 2 and intermediate_size = 3 n_embd, so per block
#       q + k + v + o = d^2 + 2 (d/2) d + d^2 = 3 d^2 and the SwiGLU 3 d (3 d) = 9 d^2, the GPT block's 12 d^2;
#       bias = false in both arms (the GPT arm keeps its LayerNorm biases, 2 d per block and d for ln_f, which
#       keep it on the fused residual-LayerNorm path). Target: step time Llama / GPT <= 1.1.
#   (b) against the same Llama-style model in plain PyTorch (bench/nanogpt_ref.py --llama: RMSNorm, rotary
#       embeddings, SwiGLU, F.scaled_dot_product_attention with enable_gqa, tied embedding, no biases) on today's
#       torch, eager (COMPILE=1 adds torch.compile), in float32 and in bf16 (spread train.precision=bf16; the peer
#       under torch.autocast("cpu", bfloat16)). Target: spread / peer >= 1.25x.
# ROUNDS rounds (default 2), each shape's runs in one order in odd rounds and the reverse in even ones, so each
# ratio is measured within minutes; ratios are of the sums of tokens/s over the rounds. The parameter counts of
# the three models are checked (the peer's must equal spread's Llama) and printed with the table, which goes to
# $OUT/bench_llama.md too when OUT is set.
# Usage: bench/bench_llama.sh [DATA_FILE]
#   STEPS_A, STEPS_B, ROUNDS, SHAPES ("A B"): a quick smoke test, e.g. STEPS_A=20 STEPS_B=12 ROUNDS=1 SHAPES=A
#   SKIP_BUILD=1: measure build/ as it is (lm_bench_common.sh rebuilds a folder named plainly "build" first)
#   PEER_PYTHON: another Python with torch >= 2; COMPILE_WARMUP as bench_lm_peers.sh
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
[[ ${SKIP_BUILD:-0} == 1 && -z ${SPREAD_BUILD:-} ]] && export SPREAD_BUILD="$PWD/build"
source bench/lm_bench_common.sh "$@"

peer_python=${PEER_PYTHON:-$(scripts/python_env.sh | tail -1)}
echo "peer: Llama-style PyTorch on $("$peer_python" -c 'import torch; print("torch", torch.__version__, "threads",
  torch.get_num_threads())')"
compile_warmup=${COMPILE_WARMUP:-10}  # steps before the first timed window of a compiled peer (its compile time)

# The Llama-style block of each shape: k/v heads n_head / 2, SwiGLU width 3 n_embd (A: 4 heads of 128 wide,
# B: 6 heads of 384 wide).
no_bias=(--set model.bias=false)
llama=("${no_bias[@]}" --set model.positions=rope --set model.norm=rmsnorm --set model.mlp=swiglu)
llama_a=("${llama[@]}" --set model.n_kv_head=2 --set model.intermediate_size=384)
llama_b=("${llama[@]}" --set model.n_kv_head=3 --set model.intermediate_size=1152)
peer_llama_a=(--llama --kv-heads 2 --intermediate 384)
peer_llama_b=(--llama --kv-heads 3 --intermediate 1152)

# "tokens/s parameters" of one spread run: mine SHAPE ARM DTYPE ROUND, ARM gpt or llama
mine() {
  local args=("${shape_a[@]}") name="$1_$2_$3_$4"
  [[ $1 == B ]] && args=("${shape_b[@]}")
  if [[ $2 == llama ]]; then
    if [[ $1 == A ]]; then args+=("${llama_a[@]}"); else args+=("${llama_b[@]}"); fi
  else
    args+=("${no_bias[@]}")
  fi
  [[ $3 == bfloat16 ]] && args+=(--set train.precision=bf16)
  local tps
  read -r tps _ <<<"$(measure "$name" "${args[@]}")"
  echo "$tps $(harness field --file "$out/$name/run.json" parameters)"
}
# "tokens/s parameters" of one PyTorch run: peer SHAPE DTYPE MODE
peer_extra_a=("${peer_llama_a[@]}") peer_extra_b=("${peer_llama_b[@]}") peer_name="PyTorch Llama"
peer() {
  local r
  r=$(peer_json "$@")
  printf '%.0f %s\n' "$(json_field "$r" tokens_per_s)" "$(json_field "$r" parameters)"
}

# One shape's runs, spread's Llama next to what it is compared with.
runs=("spread gpt float32" "spread llama float32" "peer eager float32" "spread llama bfloat16" "peer eager bfloat16")
[[ ${COMPILE:-0} == 1 ]] && runs+=("peer compiled float32" "peer compiled bfloat16")
read -ra shapes <<<"${SHAPES:-A B}"
n=${ROUNDS:-2}
declare -A sum params best
for round in $(seq "$n"); do
  order=("${runs[@]}")
  ((round % 2 == 0)) && for i in "${!runs[@]}"; do order[i]=${runs[${#runs[@]} - 1 - i]}; done
  for shape in "${shapes[@]}"; do
    line="round $round  $shape"
    for run in "${order[@]}"; do
      read -r who arm dtype <<<"$run"
      if [[ $who == spread ]]; then
        r=$(mine "$shape" "$arm" "$dtype" "$round")
      else
        r=$(peer "$shape" "$dtype" "$arm")
      fi
      read -r tps count <<<"$r"
      key="${shape} ${run}"
      sum[$key]=$(( ${sum[$key]:-0} + tps ))
      (( tps > ${best[$key]:-0} )) && best[$key]=$tps
      params[$key]=$count
      line+="  ${who} ${arm} ${dtype} ${tps}"
    done
    echo "$line tokens/s"
  done
done

ratio() { harness ratio --digits 2 "$1" "$2"; }
mean() { awk -v s="$1" -v n="$n" 'BEGIN { printf "%.0f", s / n }'; }
table=$(
  echo "(a) spread Llama-style block against spread GPT block, float32 (tokens/s: mean over $n rounds)"
  echo
  echo '| shape | parameters GPT / Llama | GPT tokens/s | Llama tokens/s | step time Llama / GPT |'
  echo '|---|---:|---:|---:|---:|'
  for shape in "${shapes[@]}"; do
    g="$shape spread gpt float32" l="$shape spread llama float32"
    echo "| $shape | ${params[$g]} / ${params[$l]} | $(mean "${sum[$g]}") | $(mean "${sum[$l]}") |" \
         "$(ratio "${sum[$g]}" "${sum[$l]}")x |"
  done
  echo
  echo "(b) spread Llama against the same model in PyTorch" \
       "$("$peer_python" -c 'import torch; print(torch.__version__)') (tokens/s: mean over $n rounds)"
  echo
  # The best round of each side too: this VM's vCPUs slow down in stretches that may catch one side's run only.
  header='| shape | precision | spread tokens/s | PyTorch eager | spread / eager | best rounds, spread / eager |'
  rule='|---|---|---:|---:|---:|---:|'
  [[ ${COMPILE:-0} == 1 ]] && header+=' PyTorch compiled | spread / compiled |' && rule+='---:|---:|'
  echo "$header"
  echo "$rule"
  for shape in "${shapes[@]}"; do
    for dtype in float32 bfloat16; do
      s="$shape spread llama $dtype" e="$shape peer eager $dtype" c="$shape peer compiled $dtype"
      row="| $shape | $dtype | $(mean "${sum[$s]}") | $(mean "${sum[$e]}") | $(ratio "${sum[$s]}" "${sum[$e]}")x |"
      row+=" $(ratio "${best[$s]}" "${best[$e]}")x |"
      [[ ${COMPILE:-0} == 1 ]] && row+=" $(mean "${sum[$c]}") | $(ratio "${sum[$s]}" "${sum[$c]}")x |"
      echo "$row"
    done
  done
  echo
  echo "Targets: step time Llama / GPT <= 1.1; spread / PyTorch >= 1.25x." \
       "Load average $(cut -d' ' -f1-3 /proc/loadavg)."
  for shape in "${shapes[@]}"; do
    [[ ${params["$shape spread llama float32"]} == "${params["$shape peer eager float32"]}" ]] ||
      echo "WARNING: shape $shape: PyTorch's Llama has ${params["$shape peer eager float32"]} parameters," \
           "spread's ${params["$shape spread llama float32"]}"
  done
)
echo
echo "$table"
if [[ -n ${OUT:-} ]]; then
  mkdir -p "$OUT"
  echo "$table" >"$OUT/bench_llama.md"
fi
