#!/usr/bin/env bash
# Pooling-aware late-interaction training (docs/design.md §6.5). One MLM backbone pretrained on the SciFact
# abstracts (recipes/mlm_scifact.toml), then, from it, the same MaxSim fine-tuning (recipes/maxsim_scifact.toml)
# plainly and with the pooling-aware loss (pool factor 4, ste = mean), on the same data, steps and seeds; every
# model evaluated on held-out SciFact claims against the full corpus at Ward pool factors 1, 2, 3, 4, 6, 8.
# The SciFact folder of the data root ($SPREAD_DATA, default ../shared/data) holds the train claims only, so the script splits them by claim (a seeded 75/25
# split; no claim in both): fine-tuning reads the 75%, evaluation the other 25%.
# Writes $OUT/table.md (and prints it). About 35 minutes on 2 cores with the defaults.
#   experiments/exp_pooling.sh [--set train.max_steps=100 ...]     (extra --set go to every fine-tuning run)
# Environment: SEEDS ("1 2 3"), JOBS (2 runs at a time, one thread each), OUT, BACKBONE=RUN_DIR (reuse one; the
#   backbone never sees a claim), SPLIT_SEED (13: the seed of the claims' split; another value replicates the
#   experiment on other held-out claims).
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
scripts/build.sh --target spread >/dev/null
out=${OUT:-checkpoints/exp_pooling_$(date +%Y%m%d-%H%M%S)}
seeds=${SEEDS:-1 2 3}
jobs=${JOBS:-2}
split_seed=${SPLIT_SEED:-13}
factors=1,2,3,4,6,8
mkdir -p "$out"
started=$(date +%s)
python=/usr/bin/python3

$python - "${SPREAD_DATA:-../shared/data}/scifact-train" "$out" "$split_seed" <<'PY'
import json, os, random, sys
src, out, split_seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = [l.rstrip("\n").split("\t") for l in open(f"{src}/qrels/train.tsv", encoding="utf-8")][1:]
judged = sorted({r[0] for r in rows})
random.Random(split_seed).shuffle(judged)
cut = int(0.75 * len(judged))
splits = {"train": set(judged[:cut]), "heldout": set(judged[cut:])}
queries = [json.loads(l) for l in open(f"{src}/queries.jsonl", encoding="utf-8") if l.strip()]
for name, ids in splits.items():
    os.makedirs(f"{out}/{name}/qrels", exist_ok=True)
    corpus = f"{out}/{name}/corpus.jsonl"
    if not os.path.exists(corpus):
        os.symlink(os.path.abspath(f"{src}/corpus.jsonl"), corpus)
    with open(f"{out}/{name}/queries.jsonl", "w", encoding="utf-8") as f:
        for q in queries:
            if str(q["_id"]) in ids:
                f.write(json.dumps(q) + "\n")
    with open(f"{out}/{name}/qrels/{'train' if name == 'train' else 'test'}.tsv", "w", encoding="utf-8") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for r in rows:
            if r[0] in ids:
                f.write("\t".join(r) + "\n")
    print(f"{name}: {len(ids)} claims (split seed {split_seed})")
PY

backbone=${BACKBONE:-$out/backbone}
if [[ -z "${BACKBONE:-}" ]]; then
  echo "== backbone (masked LM on the SciFact abstracts) =="
  build/spread train recipes/mlm_scifact.toml --set run.out_dir="$out" --set run.name=backbone >"$out/backbone.log" 2>&1 \
    || { tail -5 "$out/backbone.log"; exit 1; }
  grep -E "val |done|step +300" "$out/backbone.log" | tail -3
fi

runs=()
for seed in $seeds; do
  runs+=("plain_s$seed $seed" "aware_s$seed $seed --set loss.pooling_aware.enabled=true")
done
export out backbone factors
tune_one() {  # NAME SEED [--set ...]: fine-tune, then evaluate at every pool factor; output in $out/NAME.*
  local name=$1 seed=$2
  shift 2
  { build/spread train recipes/maxsim_scifact.toml --set run.name="$name" --set run.seed="$seed" "$@" \
      && build/spread eval --run "$out/$name" --beir "$out/heldout" --pool-factors "$factors" \
        --out "$out/$name.eval.json"; } >"$out/$name.log" 2>&1 \
    && echo "done $name" || { echo "FAILED $name (see $out/$name.log)"; return 1; }
}
export -f tune_one
common=(--set run.out_dir="$out" --set run.threads=1 --set data.path="$out/train" --set train.init_from="$backbone"
        "$@")
echo "== ${#runs[@]} fine-tuning runs, $jobs at a time =="
printf '%s\n' "${runs[@]}" | xargs -P "$jobs" -I{} bash -c 'tune_one {} "$@"' _ "${common[@]}"
minutes=$(( ($(date +%s) - started + 59) / 60 ))

$python - "$out" "$minutes" $seeds <<'PY'
import json, statistics, sys
out, minutes, seeds = sys.argv[1], sys.argv[2], sys.argv[3:]
def results(name):
    r = json.load(open(f"{out}/{name}.eval.json"))["beir"]
    return {row["pool_factor"]: row for row in r["results"]}, r
lines = []
first, meta = results(f"plain_s{seeds[0]}")
factors = sorted(first)
lines.append(f"Held-out SciFact claims: {meta['queries']} queries, {meta['documents']} documents; nDCG@10 "
             f"(share of the model's own unpooled nDCG@10). {minutes} minutes.")
lines.append("")
lines.append("| model | " + " | ".join(f"x{f:g} ({first[f]['vectors_per_doc']:.0f} vec)" for f in factors) + " |")
lines.append("|---|" + "---|" * len(factors))
kept = {"plain": [], "aware": []}
unpooled = {"plain": [], "aware": []}
for seed in seeds:
    for cond in ("plain", "aware"):
        rows, _ = results(f"{cond}_s{seed}")
        cells = [f"{rows[f]['ndcg@10']:.4f} ({100 * rows[f].get('kept', float('nan')):.1f}%)" for f in factors]
        lines.append(f"| {cond} seed {seed} | " + " | ".join(cells) + " |")
        kept[cond].append(rows[4.0]["kept"] if 4.0 in rows else float("nan"))
        unpooled[cond].append(rows[1.0]["ndcg@10"])
def spread(values):
    return f"{statistics.mean(values):+.4f} ± {statistics.stdev(values):.4f}" if len(values) > 1 else f"{values[0]:+.4f}"
d_kept = [a - p for a, p in zip(kept["aware"], kept["plain"])]
d_full = [a - p for a, p in zip(unpooled["aware"], unpooled["plain"])]
lines.append("")
lines.append(f"Share kept at pool factor 4: plain {', '.join(f'{100*k:.1f}%' for k in kept['plain'])}; "
             f"pooling-aware {', '.join(f'{100*k:.1f}%' for k in kept['aware'])}.")
lines.append(f"Paired difference (aware - plain, same seed), mean ± sd over {len(seeds)} seeds: kept share "
             f"{spread(d_kept)}; unpooled nDCG@10 {spread(d_full)}.")
text = "\n".join(lines) + "\n"
open(f"{out}/table.md", "w").write(text)
print(text)
PY
