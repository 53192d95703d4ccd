#!/usr/bin/env bash
# Experiment 3 (docs/experiments/pooling.md), as fixed before any run: does pooling-aware MaxSim training raise
# retrieval quality after Ward pooling, once the model is trained on data it cannot memorise?
# Backbone: recipes/mlm_scifact.toml (masked LM on the SciFact abstracts; it never sees a claim). Training pairs: every
# SciFact title -> its abstract (5,183 pairs as data.source = "pairs"; no claim is used for training).
# Fine-tuning: recipes/maxsim_scifact.toml unchanged (batch 16, 300 steps: under one epoch), plainly and pooling-aware
# (pool factor 4, weights 1 and 1, ste = "mean"), seeds SEEDS (default 1 2 3), all from the same backbone.
# Evaluation: all 809 train claims of the SciFact folder against its full corpus, Ward pool factors 1, 4 and 8, each
# query's nDCG@10 kept (`spread eval --per-query`).
# Primary endpoint: nDCG@10 at pool factor 4, pooling-aware minus plain. Success: above 0 in every seed, and the 95%
# interval of a query-level paired bootstrap excludes 0. The bootstrap, fixed here: each query's difference averaged
# over the seeds (aware minus plain, same seed), queries resampled with replacement 10,000 times (Python's
# random.Random(28)), the 2.5th and 97.5th percentiles of the resampled means. The kept share (x4 / x1) is secondary;
# each seed's own interval is reported too.
# Writes $OUT/table.md and prints it. Runs JOBS (2) fine-tunings at a time, one thread each.
#   experiments/exp_maxsim_titles.sh [--set ... for every fine-tuning run]
# Environment: SEEDS, JOBS, OUT (a finished run in it is kept, an unfinished one redone), BACKBONE=RUN_DIR (reuse one).
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
scripts/build.sh --target spread >/dev/null
out=${OUT:-checkpoints/exp_maxsim_titles_$(date +%Y%m%d-%H%M%S)}
seeds=${SEEDS:-1 2 3}
jobs=${JOBS:-2}
scifact="${SPREAD_DATA:-../shared/data}/scifact-train"
factors=1,4,8
mkdir -p "$out"
started=$(date +%s)
python=/usr/bin/python3

$python - "$scifact/corpus.jsonl" "$out/title_abstract.jsonl" <<'PY'
import json, sys
pairs = 0
with open(sys.argv[2], "w", encoding="utf-8") as f:
    for line in open(sys.argv[1], encoding="utf-8"):
        doc = json.loads(line)
        if doc["title"].strip() and doc["text"].strip():
            f.write(json.dumps({"anchor": doc["title"], "positive": doc["text"]}) + "\n")
            pairs += 1
print(f"{pairs} title -> abstract pairs")
PY

backbone=${BACKBONE:-$out/backbone}
if [[ -z "${BACKBONE:-}" && ! -f "$backbone/ckpt/step_00000300.ckpt" ]]; then
  echo "== backbone (masked LM on the SciFact abstracts) =="
  rm -rf "$backbone"
  build/spread train recipes/mlm_scifact.toml --set run.out_dir="$out" --set run.name=backbone >"$out/backbone.log" 2>&1 \
    || { tail -5 "$out/backbone.log"; exit 1; }
fi

aware="--set loss.pooling_aware.enabled=true --set loss.pooling_aware.pool_factor=4"
aware+=" --set loss.pooling_aware.weight_full=1 --set loss.pooling_aware.weight_pooled=1 --set loss.pooling_aware.ste=mean"
runs=()
for seed in $seeds; do
  runs+=("plain_s$seed $seed" "aware_s$seed $seed $aware")
done
export out scifact factors
tune_one() {  # NAME SEED [--set ...]: fine-tune, then evaluate at every pool factor; output in $out/NAME.*
  local name=$1 seed=$2
  shift 2
  if [[ -f "$out/$name.eval.json" ]]; then echo "kept $name (done before)"; return 0; fi
  rm -rf "${out:?}/$name"
  { build/spread train recipes/maxsim_scifact.toml --set run.name="$name" --set run.seed="$seed" "$@" \
      && build/spread eval --run "$out/$name" --beir "$scifact" --pool-factors "$factors" --per-query \
        --out "$out/$name.eval.json"; } \
    >"$out/$name.log" 2>&1 && echo "done $name" || { echo "FAILED $name (see $out/$name.log)"; return 1; }
}
export -f tune_one
common=(--set run.out_dir="$out" --set run.threads=1 --set data.source=pairs
        --set data.path="$out/title_abstract.jsonl" --set train.init_from="$backbone" "$@")
echo "== ${#runs[@]} fine-tuning runs, $jobs at a time =="
printf '%s\n' "${runs[@]}" | xargs -P "$jobs" -I{} bash -c 'tune_one {} "$@"' _ "${common[@]}"
minutes=$(( ($(date +%s) - started + 59) / 60 ))

$python - "$out" "$minutes" $seeds <<'PY'
import json, random, statistics, sys
out, minutes, seeds = sys.argv[1], sys.argv[2], sys.argv[3:]

def rows(name):
    r = json.load(open(f"{out}/{name}.eval.json"))["beir"]
    return {row["pool_factor"]: row for row in r["results"]}, r

def bootstrap(differences, resamples=10_000, seed=28):
    rng, n = random.Random(seed), len(differences)
    means = sorted(sum(differences[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    return means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1]

first, meta = rows(f"plain_s{seeds[0]}")
factors = sorted(first)
lines = [f"SciFact train claims: {meta['queries']} queries, {meta['documents']} documents; nDCG@10 (share of the "
         f"model's own unpooled nDCG@10). {minutes} minutes.", "",
         "| model | " + " | ".join(f"x{f:g} ({first[f]['vectors_per_doc']:.0f} vec)" for f in factors) + " |",
         "|---|" + "---|" * len(factors)]
per_seed, query_ids, verdict_seeds = {}, None, []
for seed in seeds:
    at4 = {}
    for cond in ("plain", "aware"):
        r, _ = rows(f"{cond}_s{seed}")
        cells = [f"{r[f]['ndcg@10']:.4f} ({100 * r[f].get('kept', float('nan')):.1f}%)" for f in factors]
        lines.append(f"| {cond} seed {seed} | " + " | ".join(cells) + " |")
        at4[cond] = r[4.0]
    query_ids = query_ids or sorted(at4["plain"]["per_query"])
    per_seed[seed] = [at4["aware"]["per_query"][q]["ndcg@10"] - at4["plain"]["per_query"][q]["ndcg@10"]
                      for q in query_ids]
    verdict_seeds.append(at4["aware"]["ndcg@10"] - at4["plain"]["ndcg@10"])
lines.append("")
lines.append("Primary endpoint, nDCG@10 at pool factor 4, pooling-aware minus plain (same seed):")
for seed, d in zip(seeds, verdict_seeds):
    low, high = bootstrap(per_seed[seed])
    lines.append(f"- seed {seed}: {d:+.4f} (this seed's query-level 95% interval [{low:+.4f}, {high:+.4f}])")
averaged = [statistics.mean(per_seed[s][i] for s in seeds) for i in range(len(query_ids))]
low, high = bootstrap(averaged)
lines.append(f"- averaged over seeds: {statistics.mean(averaged):+.4f}, query-level paired bootstrap 95% interval "
             f"[{low:+.4f}, {high:+.4f}] ({len(query_ids)} queries, 10,000 resamples)")
positive = sum(d > 0 for d in verdict_seeds)
excludes_zero = low > 0 or high < 0
lines.append(f"Success (above 0 in every seed and the interval excludes 0): "
             f"{'yes' if positive == len(seeds) and low > 0 else 'no'} ({positive} of {len(seeds)} seeds above 0; "
             f"interval {'excludes' if excludes_zero else 'includes'} 0)")
kept = {c: [rows(f"{c}_s{s}")[0][4.0].get("kept", float("nan")) for s in seeds] for c in ("plain", "aware")}
lines.append(f"Secondary, share kept at x4: plain {', '.join(f'{100 * k:.1f}%' for k in kept['plain'])}; "
             f"pooling-aware {', '.join(f'{100 * k:.1f}%' for k in kept['aware'])}.")
text = "\n".join(lines) + "\n"
open(f"{out}/table.md", "w").write(text)
print(text)
PY
