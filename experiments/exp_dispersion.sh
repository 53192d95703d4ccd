#!/usr/bin/env bash
# Dispersion in the paper's regime (docs/design.md §3; docs/experiments/dispersion.md): recipes/dispersion_scifact.toml
# (4 layers, width 384, block 128, batch 16, BPE 2048, 400 steps on the SciFact abstracts) under three conditions,
# on the same seeds: lambda = 0 (the baseline; the penalty is only logged), lambda = 1 on all layers (the
# reference's scripts; every block output, the last after the final norm) and lambda = 0.1 on the last layer
# (spread's default). lambda is fixed in advance, never chosen on these numbers.
# Writes $OUT/table.md: per seed, the peak and the area under the last-layer mean-cosine curve (before and after
# the final norm), validation loss at fixed steps as paired differences against the same seed's baseline, seconds
# per step, and the pre-registered endpoints of Experiment 1 (docs/experiments/dispersion.md; a one-sided paired t-test of the
# step-400 validation loss, lambda = 0.1 last against the baseline, with the count of seeds lower; for lambda = 1
# all, the post-norm area against 0.5 of the baseline's and the step-400 mean cosine against the baseline's).
# Runs go JOBS at a time (default 2), each on one thread: on 2 cores that is faster than one 2-thread run after
# another, and a busy machine slows a single-threaded run gracefully rather than stalling an OpenMP team.
# Usage: experiments/exp_dispersion.sh [extra --set overrides for every run]; by environment:
#   SEEDS="1 2 3"        seeds of the baseline and lambda = 0.1 last
#   MECHANISM_SEEDS      seeds of lambda = 1 all (default: SEEDS)
#   PROBES=early         probes at step 0, every 5 steps to 50, then every 25 (the first round); "every50": every
#                        50 steps from 0, no early probes (Experiment 1)
#   JOBS=2, OUT=dir
# The first round (docs/experiments/dispersion.md, about 60 minutes): experiments/exp_dispersion.sh.
# Experiment 1 (15 runs): SEEDS="4 5 6 7 8 9" MECHANISM_SEEDS="4 5 6" PROBES=every50 experiments/exp_dispersion.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh --target spread >/dev/null
out=${OUT:-checkpoints/exp_dispersion_$(date +%Y%m%d-%H%M%S)}
seeds=${SEEDS:-1 2 3}
mechanism_seeds=${MECHANISM_SEEDS:-$seeds}
jobs=${JOBS:-2}
mkdir -p "$out"
started=$(date +%s)
common=(--set run.out_dir="$out" --set run.threads=1)
case "${PROBES:-early}" in
  early) ;;
  every50) common+=(--set diagnostics.every=50 --set diagnostics.early_every=0 --set diagnostics.early_until=0) ;;
  *) echo "exp_dispersion.sh: PROBES is '$PROBES'; use early or every50" >&2; exit 2 ;;
esac
common+=("$@")
# The tokenizer depends on the data only: train it once (a one-step run), then every run reuses it.
build/spread train recipes/dispersion_scifact.toml "${common[@]}" --set run.name=tokenizer --set train.max_steps=1 \
  --set diagnostics.every=0 --set diagnostics.early_every=0 --set diagnostics.early_until=0 >"$out/tokenizer.log"
common+=(--set tokenizer.model="$out/tokenizer/tokenizer.model")
runs=()
for seed in $seeds; do
  runs+=("base_s$seed $seed" "last01_s$seed $seed --set loss.dispersion.lambda=0.1")
done
for seed in $mechanism_seeds; do
  [[ " $seeds " == *" $seed "* ]] || { echo "MECHANISM_SEEDS must be among SEEDS (its baseline): $seed" >&2; exit 2; }
  runs+=("all1_s$seed $seed --set loss.dispersion.lambda=1 --set loss.dispersion.layers=all")
done
export out
train_one() {  # NAME SEED [--set ...]; its console output goes to $out/NAME.log
  local name=$1 seed=$2
  shift 2
  build/spread train recipes/dispersion_scifact.toml --set run.name="$name" --set run.seed="$seed" "$@" \
    >"$out/$name.log" 2>&1 && echo "done $name" || { echo "FAILED $name (see $out/$name.log)"; return 1; }
}
export -f train_one
printf '%s\n' "${runs[@]}" | xargs -P "$jobs" -I{} bash -c 'train_one {} "$@"' _ "${common[@]}"
minutes=$(( ($(date +%s) - started + 59) / 60 ))
/usr/bin/python3 - "$out" "$minutes" "$seeds" "$mechanism_seeds" <<'PY'
import json, math, statistics, sys
sys.path.insert(0, "experiments")
from exp_stats import t_cdf
out, minutes, seeds, mechanism_seeds = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4].split()
conditions = [("base", "λ = 0"), ("all1", "λ = 1, all layers"), ("last01", "λ = 0.1, last layer")]
seeds_of = {"base": seeds, "all1": mechanism_seeds, "last01": seeds}
fixed_steps = [50, 100, 200, 300, 400]

def read(run):
    probes, val, elapsed, steps = [], {}, 0.0, 0
    for line in open(f"{out}/{run}/metrics.jsonl"):
        j = json.loads(line)
        if "mean_cos" in j:
            probes.append((j["step"], j["mean_cos"][-1], j["mean_cos_final"]))
        elif "val_loss" in j:
            val[j["step"]] = j["val_loss"]
        elif "loss" in j and "elapsed_s" in j:
            elapsed, steps = j["elapsed_s"], j["step"]
    probes.sort()
    return probes, val, elapsed / max(steps, 1)

def area(points, k):  # trapezoid area under the curve over the probed steps, divided by the span: a mean level
    xs, ys = [p[0] for p in points], [p[1 + k] for p in points]
    a = sum((xs[i + 1] - xs[i]) * (ys[i] + ys[i + 1]) / 2 for i in range(len(xs) - 1))
    return a / (xs[-1] - xs[0])

def peak(points, k):
    v = max(points, key=lambda p: p[1 + k])
    return v[1 + k], v[0]

def spread_of(xs):
    return f"{statistics.mean(xs):+.4f} ± {statistics.stdev(xs):.4f}" if len(xs) > 1 else f"{xs[0]:+.4f}"

runs = {(c, s): read(f"{c}_s{s}") for c, _ in conditions for s in seeds_of[c]}
fixed_steps = [k for k in fixed_steps if all(k in val for _, val, _ in runs.values())]  # shorter runs: fewer
lines = [f"Seeds {' '.join(seeds)} (λ = 1 all: {' '.join(mechanism_seeds)}); {minutes} minutes in all. Curves: the last block's intra-document mean cosine "
         "before (pre) and after (post) the final LayerNorm, on 32 single val documents.", "",
         "| condition | seed | peak post (step) | peak pre (step) | area post | area pre | area post / baseline | "
         + " | ".join(f"val loss @{s}" for s in fixed_steps) + " | s/step |",
         "|---" * (8 + len(fixed_steps)) + "|"]
for c, label in conditions:
    for s in seeds_of[c]:
        p, val, sps = runs[(c, s)]
        base = runs[("base", s)][0]
        (pk1, st1), (pk0, st0) = peak(p, 1), peak(p, 0)
        lines.append(f"| {label} | {s} | {pk1:.3f} ({st1}) | {pk0:.3f} ({st0}) | {area(p, 1):.4f} | {area(p, 0):.4f} | "
                     f"{area(p, 1) / area(base, 1):.3f} | " + " | ".join(f"{val.get(k, float('nan')):.4f}" for k in fixed_steps)
                     + f" | {sps:.3f} |")
lines += ["", "Paired differences against the same seed's λ = 0 (mean ± sample standard deviation over seeds; "
          "negative = lower than the baseline):", "",
          "| condition | Δ area post | Δ area pre | " + " | ".join(f"Δ val loss @{s}" for s in fixed_steps) + " |",
          "|---" * (3 + len(fixed_steps)) + "|"]
for c, label in conditions[1:]:
    d_post = [area(runs[(c, s)][0], 1) - area(runs[("base", s)][0], 1) for s in seeds_of[c]]
    d_pre = [area(runs[(c, s)][0], 0) - area(runs[("base", s)][0], 0) for s in seeds_of[c]]
    d_val = [[runs[(c, s)][1][k] - runs[("base", s)][1][k] for s in seeds_of[c]] for k in fixed_steps]
    lines.append(f"| {label} | {spread_of(d_post)} | {spread_of(d_pre)} | " + " | ".join(spread_of(d) for d in d_val) + " |")
lines += ["", "Baseline validation loss (mean ± sd over seeds): " +
          ", ".join(f"@{k} {statistics.mean([runs[('base', s)][1][k] for s in seeds]):.4f} ± "
                    f"{statistics.stdev([runs[('base', s)][1][k] for s in seeds]) if len(seeds) > 1 else 0:.4f}"
                    for k in fixed_steps)]

last = fixed_steps[-1]
d = [runs[("last01", s)][1][last] - runs[("base", s)][1][last] for s in seeds]
lines += ["", f"Experiment 1, primary endpoint: step-{last} validation loss, λ = 0.1 last minus λ = 0, "
          f"paired over seeds {' '.join(seeds)}: " + ", ".join(f"{x:+.4f}" for x in d)]
if len(d) > 1 and statistics.stdev(d) > 0:
    t = statistics.mean(d) / (statistics.stdev(d) / math.sqrt(len(d)))
    p, lower = t_cdf(t, len(d) - 1), sum(x < 0 for x in d)
    success = p < 0.05 and lower >= len(d) - 1
    lines.append(f"mean {statistics.mean(d):+.4f}, t = {t:.3f} ({len(d) - 1} df), one-sided p = {p:.4f}; lower in "
                 f"{lower} of {len(d)} seeds. Success (p < 0.05 and at least {len(d) - 1} of {len(d)} lower): "
                 f"{'yes' if success else 'no'}")
checks = []
for s in mechanism_seeds:
    mech, base = runs[("all1", s)][0], runs[("base", s)][0]
    ratio = area(mech, 1) / area(base, 1)
    end_mech, end_base = [dict((q[0], q[2]) for q in x).get(last, float("nan")) for x in (mech, base)]
    checks.append(ratio <= 0.5 and end_mech < end_base)
    lines.append(f"mechanism, seed {s}: area post {ratio:.3f} of the baseline's (at most 0.5), step-{last} mean "
                 f"cosine post {end_mech:.4f} against {end_base:.4f}")
lines.append(f"Mechanism success (both in every seed): {'yes' if checks and all(checks) else 'no'}")
text = "\n".join(lines) + "\n"
open(f"{out}/table.md", "w").write(text)
print(text)
PY
