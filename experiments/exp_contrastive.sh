#!/usr/bin/env bash
# Embedding condensation under contrastive training (docs/design.md §5, §7.3, §8): an MLM backbone pretrained on
# WordNet glosses (recipes/mlm_wordnet.toml), then contrastive fine-tuning from it on WordNet pairs
# (recipes/contrastive_wordnet.toml) with SEEDS seeds (default 1 2 3). Each model is measured on the same data:
#   - SOCM, intra-text mean cosine and concentration of the last block on STS-B dev sentences (spread diagnose),
#     and SOCM after the final norm (the vectors that are pooled),
#   - alignment (STS-B dev pairs scored >= 4) and uniformity (their first sentences), from `spread encode`,
#   - STS-B dev Spearman and SciFact (train queries, full corpus) nDCG@10 / MRR@10 / Recall@100 (spread eval),
# plus BM25 on the same SciFact files for context (experiments/bm25_ref.py). Writes a markdown table to
# $out/table.md and prints it. About 40 minutes on 2 cores with the defaults (measured: see
# docs/experiments/contrastive.md). Extra arguments are --set overrides for every training run.
#   experiments/exp_contrastive.sh [--set train.max_steps=100 ...]
# Environment: SEEDS ("1 2 3"); BACKBONE=RUN_DIR reuses a trained backbone (its measurements are redone);
#   SOURCE and DATA_PATH replace the fine-tuning pairs (e.g. SOURCE=stsb DATA_PATH=$SPREAD_DATA/stsb/stsb-en-train.csv).
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
scripts/build.sh --target spread >/dev/null
sts="${SPREAD_DATA:-../shared/data}/stsb/stsb-en-dev.csv"
beir="${SPREAD_DATA:-../shared/data}/scifact-train"
out=checkpoints/exp_contrastive_$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
python=/usr/bin/python3
start=$(date +%s)

# The STS-B dev sentences (first column, distinct) as the diagnose texts; the positive pairs for alignment.
$python - "$sts" "$out" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1], encoding="utf-8")))
first = list(dict.fromkeys(r[0] for r in rows))
open(sys.argv[2] + "/sentences.txt", "w").write("\n".join(first[:500]) + "\n")
pos = [r for r in rows if float(r[2]) >= 4.0]
open(sys.argv[2] + "/pos_a.txt", "w").write("\n".join(r[0] for r in pos) + "\n")
open(sys.argv[2] + "/pos_b.txt", "w").write("\n".join(r[1] for r in pos) + "\n")
PY

measure() {  # RUN_DIR LABEL: every number of one model into $out/LABEL.*
  local run=$1 label=$2
  build/spread diagnose --run "$run" --texts "$out/sentences.txt" --layers last,final --pairs 20000 \
    --out "$out/$label.diagnose.json" >/dev/null
  build/spread eval --run "$run" --sts "$sts" --beir "$beir" --pooling mean --out "$out/$label.eval.json" >/dev/null
  build/spread encode --run "$run" --in "$out/pos_a.txt" --out "$out/$label.pos_a.npy" >/dev/null 2>&1
  build/spread encode --run "$run" --in "$out/pos_b.txt" --out "$out/$label.pos_b.npy" >/dev/null 2>&1
}

backbone=${BACKBONE:-$out/backbone}
if [[ -z "${BACKBONE:-}" ]]; then
  echo "== backbone (masked LM) =="
  build/spread train recipes/mlm_wordnet.toml --set run.out_dir="$out" --set run.name=backbone "$@"
fi
measure "$backbone" backbone
data=()
[[ -n "${SOURCE:-}" ]] && data=(--set data.source="$SOURCE" --set data.path="${DATA_PATH:-}")
labels=(backbone)
for seed in ${SEEDS:-1 2 3}; do
  echo "== contrastive fine-tuning, seed $seed =="
  build/spread train recipes/contrastive_wordnet.toml --set run.out_dir="$out" --set run.name="tuned_s$seed" \
    --set run.seed="$seed" --set train.init_from="$backbone" "${data[@]}" "$@"
  measure "$out/tuned_s$seed" "tuned_s$seed"
  labels+=("tuned_s$seed")
done
$python experiments/bm25_ref.py "$beir" > "$out/bm25.json"
minutes=$(( ($(date +%s) - start + 59) / 60 ))

$python - "$out" "$minutes" "${labels[@]}" <<'PY'
import json, sys
import numpy as np
out, minutes, labels = sys.argv[1], sys.argv[2], sys.argv[3:]
def row(label):
    d, f = json.load(open(f"{out}/{label}.diagnose.json"))["layers"]  # last block, after the final norm
    e = json.load(open(f"{out}/{label}.eval.json"))
    a, b = np.load(f"{out}/{label}.pos_a.npy"), np.load(f"{out}/{label}.pos_b.npy")
    align = float(np.mean(np.sum((a - b) ** 2, axis=1)))
    sq = np.maximum(2 - 2 * a @ a.T, 0)[np.triu_indices(len(a), 1)]
    uniform = float(np.log(np.mean(np.exp(-2 * sq))))
    return [label, d["socm"]["mean"], d["mean_cos_excl"], d["concentration"], align, uniform,
            e["sts"]["spearman"], e["beir"]["ndcg@10"], e["beir"]["mrr@10"], e["beir"]["recall@100"],
            f["socm"]["mean"], f["d_mu"]["mean"], f["d_mu"]["p50"], f["mean_cos_excl"], f["batch_mean_cos"]]
rows = [row(l) for l in labels]
bm25 = json.load(open(f"{out}/bm25.json"))
head = ["model", "SOCM", "mean cos (last layer)", "concentration", "align", "uniform", "STS-B dev Spearman",
        "SciFact nDCG@10", "MRR@10", "R@100", "SOCM (after final norm)", "d_mu mean", "d_mu median",
        "intra-text mean cos (final)", "cross-text mean cos (final)"]
lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
for r in rows:
    lines.append("| " + " | ".join([r[0]] + [f"{v:.4f}" for v in r[1:]]) + " |")
lines.append(f"| BM25 (experiments/bm25_ref.py) | | | | | | | {bm25['ndcg@10']:.4f} | {bm25['mrr@10']:.4f} | {bm25['recall@100']:.4f} | | | | | |")
tuned = [r for r in rows if r[0] != "backbone"]
if tuned:
    ratios = [rows[0][1] / r[1] for r in tuned]
    lines.append("")
    lines.append(f"SOCM backbone / fine-tuned: {', '.join(f'{x:.2f}x' for x in ratios)} (seeds); "
                 f"STS-B Spearman gain: {', '.join(f'{r[6] - rows[0][6]:+.4f}' for r in tuned)}; "
                 f"wall time {minutes} min")
text = "\n".join(lines) + "\n"
open(f"{out}/table.md", "w").write(text)
print(text)
PY
