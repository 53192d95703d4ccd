#!/usr/bin/env bash
# AdamW + cosine against Muon + warmup-stable-decay on spread's small LMs, and dispersion under Muon: the design of
# docs/experiments/muon_wsd.md, run as written there. Two corpora (tiny shakespeare, the SciFact abstracts) as token
# shards read together, one BPE tokenizer of 2,048 ids learnt from both; shapes S (width 128) and L (width 256), 600
# steps of 16 x 128 tokens; the rates chosen once on S with seed 1337 (lowest final validation loss), then 3 seeds.
# Stages (STAGE, run in this order; "all" runs the five):
#   prep        prep_mix learns the tokenizer from both files; prep_shakespeare and prep_scifact tokenise one file
#               each with it; their train.bin / val.bin are linked as $OUT/mix/{train,val}_{shakespeare,scifact}.bin
#   sweep       S, seed 1337: adamw_cosine at lr 1e-3, 2e-3, 4e-3; then muon_wsd at the chosen lr and muon_lr 0.01,
#               0.02, 0.04; the choices go to $OUT/picks.env
#   main        S and L, adamw_cosine and muon_wsd, every seed (L first: the longest runs go first)
#   dispersion  S, muon_wsd with [loss.dispersion] enabled at its defaults, every seed
#   table       $OUT/table.md (printed too): the design's endpoints from the runs' metrics.jsonl
# A finished run (an "end" event in its metrics.jsonl) is kept, so a stage can be run again after a stop; an
# unfinished one is removed and run again. Every run trains on one thread, JOBS at a time; its console output goes
# to $OUT/logs/NAME.log and, each line prefixed with the run's name, to the terminal.
# Usage: STAGE=all experiments/exp_muon_wsd.sh [extra --set overrides for every training run]
# Environment:
#   SPREAD=path      the binary (default: build/spread, built first by scripts/build.sh)
#   RECIPE=path      the base recipe (default recipes/quickstart.toml; every key the design names is set here anyway)
#   OUT=dir          run outputs (default checkpoints/exp_muon_wsd)
#   SEEDS="1337 1338 1339", JOBS=2, STAGE=all (or one of prep sweep main dispersion table, or several in quotes)
# Estimated at about an hour on 2 free cores (an S run ~3 minutes, an L run ~10, one thread each); it took 130
# minutes on 2026-12-07 on the 2-vCPU machine shared with builds (docs/experiments/muon_wsd.md).
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
if [[ -z ${SPREAD:-} ]]; then
  scripts/build.sh --target spread >/dev/null
  SPREAD=build/spread
fi
recipe=${RECIPE:-recipes/quickstart.toml}
out=${OUT:-checkpoints/exp_muon_wsd}
seeds=${SEEDS:-1337 1338 1339}
jobs=${JOBS:-2}
stages=${STAGE:-all}
[[ $stages == all ]] && stages="prep sweep main dispersion table"
data_root=${SPREAD_DATA:-../shared/data}
python=/usr/bin/python3
extra=("$@")
mkdir -p "$out/runs" "$out/logs"
out=$(cd "$out" && pwd)
steps=600
sweep_seed=1337
sweep_lrs="1e-3 2e-3 4e-3"
sweep_muon_lrs="0.01 0.02 0.04"
declare -A prior_s=([S]=200 [L]=650)  # seconds a run takes on a free core, measured before the runs; refined as runs end

# Every key of the design, set explicitly so that the base recipe's values never matter.
common=(--set run.out_dir="$out/runs" --set run.threads=1
        --set data.shards="$out/mix/train_*.bin" --set data.val_shards="$out/mix/val_*.bin"
        --set tokenizer.kind=bpe --set tokenizer.vocab_size=2048 --set tokenizer.model="$out/prep/prep_mix/tokenizer.model"
        --set model.n_layer=4 --set model.n_head=4 --set model.block_size=128 --set model.dropout=0
        --set train.precision=fp32 --set train.batch_size=16 --set train.grad_accum=1 --set train.max_steps="$steps"
        --set train.warmup_steps=50 --set train.grad_clip=1 --set train.weight_decay=0.1
        --set train.eval_every=25 --set train.eval_batches=50 --set diagnostics.every=100
        --set diagnostics.early_every=0 --set diagnostics.early_until=0)
shape_args() {  # S | L
  case $1 in
    S) echo --set model.n_embd=128 ;;
    L) echo --set model.n_embd=256 ;;
  esac
}
min_lr() { awk -v lr="$1" 'BEGIN { printf "%.6g", lr / 10 }'; }
adamw_args() {  # LR
  echo --set train.optimizer=adamw --set train.schedule=cosine --set train.lr="$1" --set train.min_lr="$(min_lr "$1")"
}
muon_args() {  # LR MUON_LR
  echo --set train.optimizer=muon --set train.schedule=wsd --set train.decay_fraction=0.2 --set train.decay_shape=linear \
    --set train.lr="$1" --set train.min_lr="$(min_lr "$1")" --set train.muon_lr="$2" --set train.muon_momentum=0.95 \
    --set train.muon_nesterov=true --set train.muon_ns_precision=bf16
}

finished() { [[ -f $out/runs/$1/metrics.jsonl ]] && grep -q '"event":"end"' "$out/runs/$1/metrics.jsonl"; }

train_one() {  # NAME SEED ARGS...: one run; its wall time and the load average around it go to runs/NAME.wall
  local name=$1 seed=$2 t0 load0
  shift 2
  rm -rf "${out:?}/runs/$name"
  t0=$(date +%s.%N)
  load0=$(cut -d' ' -f1 /proc/loadavg)
  if nice -n 10 "$SPREAD" train "$recipe" "${common[@]}" --set run.name="$name" --set run.seed="$seed" "$@" "${extra[@]}" \
      2>&1 | tee "$out/logs/$name.log" | sed -u "s/^/  $name | /"; then
    echo "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') $load0 $(cut -d' ' -f1 /proc/loadavg)" \
      >"$out/runs/$name.wall"
  else
    echo "FAILED $name (see $out/logs/$name.log)" >&2
    return 1
  fi
}

# run_all "NAME SHAPE SEED ARGS..." ...: JOBS at a time, with the position and an estimate of the time left.
run_all() {
  local total=$# i=0 entry name shape seed rest est now w n s e sh
  local -A done_s=() done_n=()
  for entry; do
    read -r name shape seed rest <<<"$entry"
    i=$((i + 1))
    if finished "$name"; then
      echo "[$i/$total] $name: finished before, kept"
      continue
    fi
    while (( $(jobs -rp | wc -l) >= jobs )); do wait -n || true; done
    # Refine the estimate of each shape from the runs of this call that have ended.
    for w in "$out"/runs/*.wall; do
      [[ -e $w ]] || continue
      n=$(basename "$w" .wall)
      [[ $w -nt $out/.stage_start ]] || continue
      s=${n%%_*}; [[ $s == S || $s == L ]] || s=S
      done_s[$s]=$(( ${done_s[$s]:-0} + $(cut -d' ' -f1 "$w" | cut -d. -f1) )); done_n[$s]=$(( ${done_n[$s]:-0} + 1 ))
    done
    est=0
    for e in "${@:i}"; do
      read -r _ sh _ <<<"$e"
      if [[ -n ${done_n[$sh]:-} ]]; then est=$((est + done_s[$sh] / done_n[$sh])); else est=$((est + prior_s[$sh])); fi
    done
    done_s=() done_n=()
    now=$(date +%s)
    echo "[$i/$total] $name starts; this stage ends in about $(( (est / jobs + 59) / 60 )) min" \
         "(~$(date -d @$((now + est / jobs)) +%H:%M)); load average $(cut -d' ' -f1-3 /proc/loadavg)"
    # shellcheck disable=SC2086  # rest holds --set KEY=VALUE words without spaces
    train_one "$name" "$seed" $rest &
  done
  wait
  for entry; do
    read -r name _ <<<"$entry"
    finished "$name" || { echo "exp_muon_wsd.sh: run $name did not finish (see $out/logs/$name.log)" >&2; exit 1; }
  done
}

final_val() {  # RUN: the validation loss at the last step
  $python -c 'import json, sys
v = [json.loads(l) for l in open(sys.argv[1]) if "\"val_loss\"" in l]
print(v[-1]["val_loss"])' "$out/runs/$1/metrics.jsonl"
}
pick() {  # PREFIX VALUES: the value whose run PREFIX<value> ends with the lowest validation loss
  local prefix=$1 best="" best_loss="" v loss
  for v in $2; do
    loss=$(final_val "$prefix$v")
    if [[ -z $best ]] || awk -v a="$loss" -v b="$best_loss" 'BEGIN { exit !(a < b) }'; then best=$v; best_loss=$loss; fi
  done
  echo "$best"
}
load_picks() {
  [[ -f $out/picks.env ]] || { echo "exp_muon_wsd.sh: no $out/picks.env; run STAGE=sweep first" >&2; exit 1; }
  # shellcheck disable=SC1091
  source "$out/picks.env"
}

for stage in $stages; do
  touch "$out/.stage_start"
  started=$(date +%s)
  echo "== stage $stage ($(date +%H:%M:%S); $SPREAD, $recipe, out $out)"
  case $stage in
    prep)
      base=(--set run.out_dir="$out/prep" --set run.threads=1 --set data.source=text --set tokenizer.kind=bpe
            --set tokenizer.vocab_size=2048 --set train.max_steps=1 --set train.warmup_steps=0 --set diagnostics.every=0)
      mkdir -p "$out/prep" "$out/mix"
      shakespeare=$data_root/tinyshakespeare/input.txt
      scifact=$data_root/scifact-train/corpus.jsonl
      nice -n 10 "$SPREAD" train "$recipe" "${base[@]}" --set run.name=prep_mix \
        --set "data.path=[$shakespeare,$scifact]" >"$out/logs/prep_mix.log" 2>&1
      grep -E '^(tokenizer|data):' "$out/logs/prep_mix.log" | sed 's/^/  prep_mix | /'
      for corpus in shakespeare scifact; do
        path=$shakespeare; [[ $corpus == scifact ]] && path=$scifact
        nice -n 10 "$SPREAD" train "$recipe" "${base[@]}" --set run.name="prep_$corpus" --set data.path="$path" \
          --set tokenizer.model="$out/prep/prep_mix/tokenizer.model" >"$out/logs/prep_$corpus.log" 2>&1
        grep -E '^(tokenizer|data):' "$out/logs/prep_$corpus.log" | sed "s/^/  prep_$corpus | /"
        ln -sfn "$out/prep/prep_$corpus/train.bin" "$out/mix/train_$corpus.bin"
        ln -sfn "$out/prep/prep_$corpus/val.bin" "$out/mix/val_$corpus.bin"
      done
      ;;
    sweep)
      runs=()
      for lr in $sweep_lrs; do
        runs+=("sweep_adamw_lr$lr S $sweep_seed $(shape_args S) $(adamw_args "$lr")")
      done
      run_all "${runs[@]}"
      adamw_lr=$(pick sweep_adamw_lr "$sweep_lrs")
      echo "adamw_cosine: lr = $adamw_lr (lowest final validation loss)"
      runs=()
      for mlr in $sweep_muon_lrs; do
        runs+=("sweep_muon_lr${adamw_lr}_mlr$mlr S $sweep_seed $(shape_args S) $(muon_args "$adamw_lr" "$mlr")")
      done
      run_all "${runs[@]}"
      muon_lr=$(pick "sweep_muon_lr${adamw_lr}_mlr" "$sweep_muon_lrs")
      echo "muon_wsd: lr = $adamw_lr, muon_lr = $muon_lr (lowest final validation loss)"
      printf 'adamw_lr=%s\nmuon_lr=%s\n' "$adamw_lr" "$muon_lr" >"$out/picks.env"
      ;;
    main)
      load_picks
      runs=()
      for shape in L S; do
        for seed in $seeds; do
          runs+=("${shape}_adamw_cosine_s$seed $shape $seed $(shape_args $shape) $(adamw_args "$adamw_lr")"
                 "${shape}_muon_wsd_s$seed $shape $seed $(shape_args $shape) $(muon_args "$adamw_lr" "$muon_lr")")
        done
      done
      run_all "${runs[@]}"
      ;;
    dispersion)
      load_picks
      runs=()
      for seed in $seeds; do
        runs+=("S_muon_wsd_dispersion_s$seed S $seed $(shape_args S) $(muon_args "$adamw_lr" "$muon_lr") --set loss.dispersion.enabled=true")
      done
      run_all "${runs[@]}"
      ;;
    table)
      load_picks
      $python - "$out" "$seeds" "$sweep_lrs" "$sweep_muon_lrs" "$adamw_lr" "$muon_lr" <<'PY'
import json, os, statistics, sys
sys.path.insert(0, "experiments")
from exp_stats import mean_sd
out, seeds, sweep_lrs, sweep_muon_lrs, adamw_lr, muon_lr = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), \
    sys.argv[4].split(), sys.argv[5], sys.argv[6]
TOKENS_PER_STEP = 16 * 128

def read(run):
    """The run's validation curve {step: (loss, bpb)}, last-layer probes {step: (pre, post)}, seconds per training
    step, its wall time (s) and the load average at its start and end."""
    val, probes, sps = {}, {}, float("nan")
    for line in open(f"{out}/runs/{run}/metrics.jsonl"):
        j = json.loads(line)
        if "val_loss" in j:
            val[j["step"]] = (j["val_loss"], j.get("val_bpb", float("nan")))
        elif "mean_cos" in j:
            probes[j["step"]] = (j["mean_cos"][-1], j["mean_cos_final"])
        elif j.get("event") == "end":
            sps = j["elapsed_s"] / j["step"]
    wall, load0, load1 = (float(x) for x in open(f"{out}/runs/{run}.wall").read().split())
    return {"val": val, "probes": probes, "sps": sps, "wall": wall, "load": (load0, load1)}

def final(r):
    return r["val"][max(r["val"])]

def reached(r, target):
    """Tokens at the first evaluation whose loss is at or below target, or None."""
    for step in sorted(r["val"]):
        if r["val"][step][0] <= target:
            return step * TOKENS_PER_STEP
    return None

def decide(diffs, ref_finals, names):
    """The design's rule: better only when all paired differences share a sign and |mean| > 2 sd of ref_finals."""
    mean = statistics.mean(diffs)
    sd = statistics.stdev(ref_finals) if len(ref_finals) > 1 else float("nan")  # one seed: no decision
    same = all(d < 0 for d in diffs) or all(d > 0 for d in diffs)
    verdict = "no difference at this size"
    if same and abs(mean) > 2 * sd:
        verdict = f"{names[0] if mean < 0 else names[1]} better"
    return (f"all {len(diffs)} of one sign: {'yes' if same else 'no'}; |mean| {abs(mean):.4f} against 2 sd = "
            f"{2 * sd:.4f}: {verdict}")

first = read(f"sweep_adamw_lr{sweep_lrs[0]}")
lines = [f"## Sweep (S, seed 1337; final = step {max(first['val'])})", "",
         "| arm | lr | muon_lr | final val loss | final bits/byte | wall (s) | s/step |", "|---|---|---|---|---|---|---|"]
for lr in sweep_lrs:
    r = read(f"sweep_adamw_lr{lr}")
    lines.append(f"| adamw_cosine | {lr} | | {final(r)[0]:.4f} | {final(r)[1]:.4f} | {r['wall']:.0f} | {r['sps']:.3f} |")
for mlr in sweep_muon_lrs:
    r = read(f"sweep_muon_lr{adamw_lr}_mlr{mlr}")
    lines.append(f"| muon_wsd | {adamw_lr} | {mlr} | {final(r)[0]:.4f} | {final(r)[1]:.4f} | {r['wall']:.0f} | "
                 f"{r['sps']:.3f} |")
lines += ["", f"Chosen (lowest final validation loss): adamw_cosine lr = {adamw_lr}; muon_wsd lr = {adamw_lr}, "
          f"muon_lr = {muon_lr}. L uses the same rates (no sweep on L)."]

runs = {}
for shape in ("S", "L"):
    for seed in seeds:
        for arm in ("adamw_cosine", "muon_wsd"):
            runs[(shape, arm, seed)] = read(f"{shape}_{arm}_s{seed}")
for seed in seeds:
    runs[("S", "muon_wsd_dispersion", seed)] = read(f"S_muon_wsd_dispersion_s{seed}")

for shape in ("S", "L"):
    a = [runs[(shape, "adamw_cosine", s)] for s in seeds]
    m = [runs[(shape, "muon_wsd", s)] for s in seeds]
    d = [final(y)[0] - final(x)[0] for x, y in zip(a, m)]
    db = [final(y)[1] - final(x)[1] for x, y in zip(a, m)]
    lines += ["", f"## {shape}: muon_wsd against adamw_cosine (final = step {max(a[0]['val'])}, "
              f"{max(a[0]['val']) * TOKENS_PER_STEP:,} tokens)", "",
              "| seed | adamw val loss | muon val loss | Δ loss (muon − adamw) | adamw bits/byte | muon bits/byte | Δ bits/byte "
              "| tokens for muon to reach adamw's final | tokens for adamw itself |", "|---|---|---|---|---|---|---|---|---|"]
    for s, x, y, dd, ddb in zip(seeds, a, m, d, db):
        t, t0 = reached(y, final(x)[0]), reached(x, final(x)[0])
        lines.append(f"| {s} | {final(x)[0]:.4f} | {final(y)[0]:.4f} | {dd:+.4f} | {final(x)[1]:.4f} | {final(y)[1]:.4f} | "
                     f"{ddb:+.4f} | {'not reached' if t is None else f'{t:,}'} | {t0:,} |")
    lines += [f"| mean ± sd | {mean_sd([final(x)[0] for x in a])} | {mean_sd([final(y)[0] for y in m])} | {mean_sd(d)} | "
              f"{mean_sd([final(x)[1] for x in a])} | {mean_sd([final(y)[1] for y in m])} | {mean_sd(db)} | | |", "",
              f"Decision ({shape}, primary endpoint): " + decide(d, [final(x)[0] for x in a], ("muon_wsd", "adamw_cosine"))]
    steps = sorted({k for k in (50, 100, 200, 300, 400, 480, 500, 550) if k in a[0]["val"]} | {max(a[0]["val"])})
    lines += ["", f"Validation loss curves ({shape}, mean over seeds; every 25 steps in metrics.jsonl):", "",
              "| arm | " + " | ".join(f"@{k}" for k in steps) + " |", "|---" * (1 + len(steps)) + "|"]
    for arm, rs in (("adamw_cosine", a), ("muon_wsd", m)):
        lines.append(f"| {arm} | " + " | ".join(f"{statistics.mean(r['val'][k][0] for r in rs):.4f}" for k in steps) + " |")
    lines.append("| Δ (paired mean) | " + " | ".join(
        f"{statistics.mean(y['val'][k][0] - x['val'][k][0] for x, y in zip(a, m)):+.4f}" for k in steps) + " |")

m = [runs[("S", "muon_wsd", s)] for s in seeds]
dp = [runs[("S", "muon_wsd_dispersion", s)] for s in seeds]
d = [final(y)[0] - final(x)[0] for x, y in zip(m, dp)]
last = max(m[0]["probes"])
lines += ["", "## Dispersion under Muon (S): muon_wsd_dispersion against muon_wsd", "",
          f"| seed | muon val loss | muon + dispersion val loss | Δ loss | Δ bits/byte | last-layer mean cos @{last} "
          "pre / post final norm, muon | same, muon + dispersion |", "|---|---|---|---|---|---|---|"]
for s, x, y, dd in zip(seeds, m, dp, d):
    px, py = x["probes"][last], y["probes"][last]
    lines.append(f"| {s} | {final(x)[0]:.4f} | {final(y)[0]:.4f} | {dd:+.4f} | {final(y)[1] - final(x)[1]:+.4f} | "
                 f"{px[0]:.3f} / {px[1]:.3f} | {py[0]:.3f} / {py[1]:.3f} |")
lines += [f"| mean ± sd | {mean_sd([final(x)[0] for x in m])} | {mean_sd([final(y)[0] for y in dp])} | {mean_sd(d)} | "
          f"{mean_sd([final(y)[1] - final(x)[1] for x, y in zip(m, dp)])} | "
          f"{statistics.mean(x['probes'][last][0] for x in m):.3f} / {statistics.mean(x['probes'][last][1] for x in m):.3f} | "
          f"{statistics.mean(y['probes'][last][0] for y in dp):.3f} / {statistics.mean(y['probes'][last][1] for y in dp):.3f} |",
          "", "Decision (dispersion; the design's rule, 2 sd of the S AdamW arm's final losses): "
          + decide(d, [final(runs[('S', 'adamw_cosine', s)])[0] for s in seeds], ("muon_wsd_dispersion", "muon_wsd"))
          + f". (2 sd of muon_wsd's own final losses: {2 * statistics.stdev(final(x)[0] for x in m) if len(m) > 1 else float('nan'):.4f}.)",
          "", "Last-layer mean cosine (post final norm) by step, mean over seeds:", "",
          "| arm | " + " | ".join(f"@{k}" for k in sorted(m[0]["probes"])) + " |", "|---" * (1 + len(m[0]["probes"])) + "|"]
for arm, rs in (("muon_wsd", m), ("muon_wsd_dispersion", dp)):
    lines.append(f"| {arm} | " + " | ".join(f"{statistics.mean(r['probes'][k][1] for r in rs):.3f}"
                                          for k in sorted(m[0]["probes"])) + " |")

lines += ["", "## Wall time per run (one thread each, two runs at a time; load average at start and end)", "",
          "| run | wall (s) | training s/step | load start → end |", "|---|---|---|---|"]
names = sorted(n[:-5] for n in os.listdir(f"{out}/runs") if n.endswith(".wall"))
for n in names:
    r = read(n)
    lines.append(f"| {n} | {r['wall']:.0f} | {r['sps']:.3f} | {r['load'][0]:.2f} → {r['load'][1]:.2f} |")
for shape in ("S", "L"):
    for arm in ("adamw_cosine", "muon_wsd", "muon_wsd_dispersion"):
        rs = [runs[k] for k in runs if k[0] == shape and k[1] == arm]
        if rs:
            lines.append(f"| {shape} {arm}, mean of seeds | {statistics.mean(r['wall'] for r in rs):.0f} | "
                         f"{statistics.mean(r['sps'] for r in rs):.3f} | |")
lines.append(f"| all runs, sum | {sum(read(n)['wall'] for n in names):.0f} | | |")
text = "\n".join(lines) + "\n"
open(f"{out}/table.md", "w").write(text)
print(text)
PY
      ;;
    *) echo "exp_muon_wsd.sh: unknown stage '$stage' (prep, sweep, main, dispersion, table, all)" >&2; exit 2 ;;
  esac
  echo "== stage $stage done in $(( ($(date +%s) - started + 59) / 60 )) min"
done
