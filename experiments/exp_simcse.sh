#!/usr/bin/env bash
# Experiment 2 (docs/experiments/simcse.md), as fixed before any run: unsupervised SimCSE from an MLM backbone, and SOCM.
# Backbone: recipes/mlm_wordnet.toml (600 steps). Arm: recipes/contrastive_wordnet.toml with
# loss.contrastive.simcse = true (the positive is the anchor under another dropout mask) on the WordNet
# "lemmas: definition" texts (every synset, as spread's wordnet loader writes them, without the examples), tau 0.05,
# batch 64 in mini-batches of 32, lr 3e-4 -> 3e-5, warmup 30, 600 steps, seeds SEEDS (default 1 2 3).
# Logged by the trainer at steps 0, 150, 300, 450 and 600: SOCM after the final norm, d_mu (mean and median), the
# intra-text and cross-text mean cosine after the final norm (32 probe texts of the validation split), and STS-B dev
# Spearman (from step 150; the backbone's by spread eval). Gate: the first step's InfoNCE below ln 64 and the final
# validation InfoNCE below 1.0, else the seed is reported as not fitted. Success, in every seed: SOCM at step 600 at
# most 0.67x step 0's, mean d_mu at least step 0's, STS-B dev at least the backbone's + 0.05.
# Writes $OUT/table.md and prints it. Runs one after another on all cores.
#   experiments/exp_simcse.sh [--set ... for every fine-tuning run]
# Environment: SEEDS, OUT (a finished seed in it is kept, an unfinished one redone), BACKBONE=RUN_DIR (reuse a trained
# backbone), WORDNET (default /usr/share/wordnet).
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
scripts/build.sh --target spread >/dev/null
out=${OUT:-checkpoints/exp_simcse_$(date +%Y%m%d-%H%M%S)}
seeds=${SEEDS:-1 2 3}
sts="${SPREAD_DATA:-../shared/data}/stsb/stsb-en-dev.csv"
mkdir -p "$out"
started=$(date +%s)
python=/usr/bin/python3

# "lemma, lemma: definition" per synset (src/data/wordnet.cpp's parse, without the examples), each its own positive.
$python - "${WORDNET:-/usr/share/wordnet}" "$out/lemmas_definition.jsonl" <<'PY'
import json, sys
src, dst = sys.argv[1], sys.argv[2]
texts = []
for pos in ("noun", "verb", "adj", "adv"):
    for line in open(f"{src}/data.{pos}", encoding="utf-8", errors="replace"):
        if not line or line[0] == " " or " | " not in line:
            continue
        head, gloss = line.split(" | ", 1)
        fields = head.split()
        count = int(fields[3], 16)
        lemmas = [w.split("(")[0].replace("_", " ") for w in fields[4:4 + 2 * count:2]]
        definition = gloss.strip().split('"')[0].strip().rstrip(";").strip()
        if definition and lemmas:
            texts.append(", ".join(lemmas) + ": " + definition)
with open(dst, "w", encoding="utf-8") as f:
    for t in texts:
        f.write(json.dumps({"anchor": t, "positive": t}) + "\n")
print(f"{len(texts)} lemmas: definition texts")
PY

backbone=${BACKBONE:-$out/backbone}
if [[ -z "${BACKBONE:-}" ]]; then
  echo "== backbone (masked LM on WordNet) =="
  build/spread train recipes/mlm_wordnet.toml --set run.out_dir="$out" --set run.name=backbone >"$out/backbone.log" 2>&1 \
    || { tail -5 "$out/backbone.log"; exit 1; }
fi
build/spread eval --run "$backbone" --sts "$sts" --pooling mean --out "$out/backbone.eval.json" >/dev/null
for seed in $seeds; do
  run="$out/simcse_s$seed"
  # A seed whose last checkpoint exists is done (a session ending mid-run leaves only the unfinished ones to redo).
  if [[ -f "$run/ckpt/step_00000600.ckpt" ]]; then echo "== SimCSE, seed $seed: done before, kept =="; continue; fi
  rm -rf "$run"
  echo "== SimCSE, seed $seed =="
  build/spread train recipes/contrastive_wordnet.toml --set run.out_dir="$out" --set run.name="simcse_s$seed" \
    --set run.seed="$seed" --set train.init_from="$backbone" \
    --set data.source=pairs --set data.path="$out/lemmas_definition.jsonl" --set loss.contrastive.simcse=true \
    --set loss.contrastive.temperature=0.05 --set train.batch_size=64 --set loss.contrastive.mini_batch=32 \
    --set train.lr=3e-4 --set train.min_lr=3e-5 --set train.warmup_steps=30 --set train.max_steps=600 \
    --set train.eval_every=150 --set diagnostics.every=150 --set train.ckpt_every=600 --set eval.sts="$sts" \
    "$@" >"$out/simcse_s$seed.log" 2>&1 || { tail -5 "$out/simcse_s$seed.log"; exit 1; }
done
minutes=$(( ($(date +%s) - started + 59) / 60 ))

$python - "$out" "$minutes" $seeds <<'PY'
import json, math, sys
out, minutes, seeds = sys.argv[1], sys.argv[2], sys.argv[3:]
backbone_sts = json.load(open(f"{out}/backbone.eval.json"))["sts"]["spearman"]

def read(run):
    probes, evals, first_loss = {}, {}, None
    for line in open(f"{out}/{run}/metrics.jsonl"):
        j = json.loads(line)
        if "socm" in j:
            probes[j["step"]] = j
        elif "val_loss" in j:
            evals[j["step"]] = j
        elif "loss" in j and j.get("step") == 1:
            first_loss = j["loss"]
    return probes, evals, first_loss

head = ["seed", "step", "SOCM (final norm)", "d_mu mean", "d_mu median", "intra-text mean cos", "cross-text mean cos",
        "STS-B dev Spearman", "val InfoNCE"]
lines = [f"Backbone STS-B dev Spearman {backbone_sts:.4f}; {minutes} minutes.", "",
         "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
verdicts = []
for s in seeds:
    probes, evals, first_loss = read(f"simcse_s{s}")
    for step in sorted(probes):
        p, e = probes[step], evals.get(step, {})
        sts = e.get("sts_spearman", backbone_sts if step == 0 else float("nan"))
        lines.append(f"| {s} | {step} | {p['socm']:.4f} | {p['socm_d_mu']:.4f} | {p['socm_d_mu_median']:.4f} | "
                     f"{p['mean_cos_final']:.4f} | {p['batch_mean_cos_final']:.4f} | {sts:.4f} | "
                     f"{e.get('val_loss', float('nan')):.4f} |")
    last = max(probes)
    final_val = evals.get(last, {}).get("val_loss", float("nan"))
    fitted = first_loss is not None and first_loss < math.log(64) and final_val < 1.0
    start, end = probes[0], probes[last]
    sts_end = evals.get(last, {}).get("sts_spearman", float("nan"))
    checks = [end["socm"] <= 0.67 * start["socm"], end["socm_d_mu"] >= start["socm_d_mu"],
              sts_end >= backbone_sts + 0.05]
    verdicts.append(fitted and all(checks))
    lines.append(f"| {s} | gate | first-step InfoNCE {first_loss if first_loss is None else round(first_loss, 4)} "
                 f"(< ln 64 = {math.log(64):.4f}), final val InfoNCE {final_val:.4f} (< 1.0): "
                 f"{'fitted' if fitted else 'NOT FITTED'} | SOCM {end['socm'] / start['socm']:.3f}x step 0 (<= 0.67) | "
                 f"d_mu {end['socm_d_mu'] - start['socm_d_mu']:+.4f} (>= 0) | STS {sts_end - backbone_sts:+.4f} "
                 f"(>= +0.05) | | | |")
lines += ["", f"Success (fitted and all three, in every seed): {'yes' if verdicts and all(verdicts) else 'no'} "
          f"({sum(verdicts)} of {len(verdicts)} seeds)"]
text = "\n".join(lines) + "\n"
open(f"{out}/table.md", "w").write(text)
print(text)
PY
