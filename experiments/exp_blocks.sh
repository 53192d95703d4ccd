#!/usr/bin/env bash
# The modern blocks against spread's own at equal parameters, data, tokenizer and schedule:
#   LM:  recipes/quickstart.toml (GPT-2-shaped) against recipes/llama_tiny.toml (rotary positions, RMSNorm, SwiGLU,
#        2 k/v heads for 4, no biases);
#   MLM: recipes/mlm_wordnet.toml (BERT-shaped, pre-norm) against recipes/modernbert_mlm.toml (rotary positions
#        with local/global bases, local attention on 2 of 4 layers, GeGLU, bias-free LayerNorms).
# Each pair on the same seeds, everything else as the recipes ship (the design, fixed before the runs). Endpoint:
# validation loss at the last step (paired differences over seeds, modern minus own, with a two-sided paired
# t-test); beside it throughput (tokens/s; texts/s for MLM; median over the logged windows after step 20),
# parameters and, where the recipe evaluates STS-B (the MLM pair), the dev Spearman of mean-pooled states at the
# last step. The tokenizer of
# each pair is trained once and shared by both arms. Runs go one after another on the machine's threads, the arms
# of a seed in alternating order, so the tokens/s of a pair are measured under the same conditions.
# Writes $OUT/table.md. About 40 minutes on 2 cores (12 runs).
# Usage: experiments/exp_blocks.sh [extra --set overrides for every run]; by environment: SEEDS="1 2 3", PAIRS="lm mlm",
# OUT=dir.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh --target spread >/dev/null
out=${OUT:-checkpoints/exp_blocks_$(date +%Y%m%d-%H%M%S)}
seeds=${SEEDS:-1 2 3}
read -ra pairs <<<"${PAIRS:-lm mlm}"
mkdir -p "$out"
started=$(date +%s)
declare -A own=([lm]=quickstart [mlm]=mlm_wordnet) modern=([lm]=llama_tiny [mlm]=modernbert_mlm)

train() {  # RECIPE NAME [--set ...]: one run, its console output in $out/NAME.log
  local recipe=$1 name=$2
  shift 2
  echo "$(date +%T) $name"
  build/spread train "recipes/$recipe.toml" --set run.out_dir="$out" --set run.name="$name" "$@" \
    >"$out/$name.log" 2>&1 || { echo "FAILED $name (see $out/$name.log)" >&2; return 1; }
}

for pair in "${pairs[@]}"; do
  [[ -n ${own[$pair]:-} ]] || { echo "exp_blocks.sh: PAIRS has '$pair'; use lm and/or mlm" >&2; exit 2; }
  # The tokenizer depends on the data and [tokenizer] only, the same in both recipes of a pair: one 1-step run.
  train "${own[$pair]}" "${pair}_tokenizer" --set train.max_steps=1 --set train.eval_every=0 \
    --set diagnostics.every=0 "$@"
  tokenizer=(--set tokenizer.model="$out/${pair}_tokenizer/tokenizer.model")
  i=0
  for seed in $seeds; do
    arms=("${own[$pair]}" "${modern[$pair]}")
    ((i++ % 2)) && arms=("${modern[$pair]}" "${own[$pair]}")
    for recipe in "${arms[@]}"; do
      train "$recipe" "${recipe}_s$seed" --set run.seed="$seed" "${tokenizer[@]}" "$@"
    done
  done
done
minutes=$(( ($(date +%s) - started + 59) / 60 ))

/usr/bin/python3 - "$out" "$minutes" "$seeds" "${pairs[*]}" <<'PY'
import json, statistics, sys
sys.path.insert(0, "experiments")
from exp_stats import mean_sd, paired_t
out, minutes, seeds, pairs = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4].split()
recipes = {"lm": ("quickstart", "llama_tiny"), "mlm": ("mlm_wordnet", "modernbert_mlm")}

def read(run):
    val, sts, tps = {}, {}, []
    for line in open(f"{out}/{run}/metrics.jsonl"):
        j = json.loads(line)
        if "val_loss" in j:
            val[j["step"]] = j["val_loss"]
            sts[j["step"]] = j.get("sts_spearman", float("nan"))
        elif j["step"] > 20 and ("tokens_per_s" in j or "texts_per_s" in j):  # the MLM task counts texts
            tps.append(j.get("tokens_per_s", j.get("texts_per_s")))
    last = max(val)
    return {"step": last, "val": val[last], "sts": sts[last], "tps": statistics.median(tps),
            "params": json.load(open(f"{out}/{run}/run.json"))["parameters"]}

lines = [f"Seeds {' '.join(seeds)}; {minutes} minutes in all; one run at a time.", "",
         "| recipe | seed | parameters | val loss (step) | STS-B dev Spearman (recipes with [eval] sts) |"
         " tokens/s (LM), texts/s (MLM) |",
         "|---|---:|---:|---:|---:|---:|"]
summary = ["", "| pair | Δ val loss (modern − own) | t (df), two-sided p | modern lower | Δ STS-B dev Spearman |"
           " throughput own → modern | step time modern / own |", "|---|---:|---:|---:|---:|---:|---:|"]
for pair in pairs:
    runs = {(r, s): read(f"{r}_s{s}") for r in recipes[pair] for s in seeds}
    for r in recipes[pair]:
        for s in seeds:
            x = runs[(r, s)]
            lines.append(f"| {r} | {s} | {x['params']} | {x['val']:.4f} ({x['step']}) | {x['sts']:.4f} |"
                         f" {x['tps']:.0f} |")
    own, modern = recipes[pair]
    d = [runs[(modern, s)]["val"] - runs[(own, s)]["val"] for s in seeds]
    t, df, p = paired_t(d)
    tps_own = statistics.mean(runs[(own, s)]["tps"] for s in seeds)
    tps_modern = statistics.mean(runs[(modern, s)]["tps"] for s in seeds)
    d_sts = [runs[(modern, s)]["sts"] - runs[(own, s)]["sts"] for s in seeds]
    summary.append(f"| {modern} − {own} | {mean_sd(d)} | {t:.2f} ({df}), {p:.3f} |"
                   f" {sum(x < 0 for x in d)} of {len(d)} | {mean_sd(d_sts)} | {tps_own:.0f} → {tps_modern:.0f} |"
                   f" {tps_own / tps_modern:.2f} |")
text = "\n".join(lines + summary) + "\n"
open(f"{out}/table.md", "w").write(text)
print(text)
PY
