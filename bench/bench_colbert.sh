#!/usr/bin/env bash
# A ColBERT trained from a real pretrained encoder, plain and pooling-aware, by spread against PyLate 1.6 and
# sentence-transformers 6.3 doing the same job (docs/experiments/colbert_minilm.md, the fixed design):
#   model     all-MiniLM-L6-v2 (scripts/get_model.sh), a fresh 384 -> 128 head without bias, "[Q] " / "[D] " added
#             to the tokenizer as PyLate adds them, queries [MASK]-expanded to 32 tokens, documents cut to 180,
#             punctuation skipped in documents (PyLate's defaults)
#   data      SciFact train (../shared/data/scifact-train) split by `spread split --dev-fraction 0.1 --seed 1`
#             (train: 728 claims, dev: 81 claims scored over all 5,183 abstracts); one mined hard negative per pair
#             (`spread mine`, rank 10-50, at least 0.05 below the hardest positive; the pairs without one are left
#             out by mine), BENCH_DIR/mined.jsonl, the same file for every system (delete it to mine again)
#   training  batch 16 of (query, positive, negative), in-batch + hard negatives, MaxSim contrastive loss at
#             temperature 1, STEPS optimizer steps (default 104), lr 3e-5, 10 warmup steps then a cosine to 0
#             (spread's schedule; the peers get it through a LambdaLR), AdamW (0.9, 0.95) eps 1e-8, weight decay
#             0.01 on the matrices, gradient clip 1, dropout 0.1, float32, THREADS threads, no text twice in a batch,
#             no evaluation, the last step kept; the arms (ARMS):
#               spread_plain  recipes/colbert_minilm_scifact.toml, then `spread export` (a PyLate folder)
#               spread_pa     the same with --set loss.pooling_aware.enabled=true (pool factor 4)
#               pylate_plain  pylate.models.ColBERT + losses.Contrastive + ColBERTCollator, SentenceTransformerTrainer
#                             (.venv: scripts/python_env.sh)
#               st6_plain     sentence-transformers 6.3 MultiVectorEncoder + MultiVectorMultipleNegativesRankingLoss,
#                             MultiVectorEncoderTrainer (.venv-peers: scripts/python_env.sh --peers)
#               st6_pa        the same loss inside MultiVectorTokenPoolingLoss([None, HierarchicalTokenPooling(4)])
#             (the peers: bench/bench_colbert_peer.py, whose docstring says how each library is set up)
#   the job   load, train, save: spread train + spread export of the last step; the peer's script from start to
#             model.save; wall time and peak RSS from /usr/bin/time
#   scored    by one scorer, `spread eval --model DIR --qrels dev --pool-factors 1,2,4` (dev nDCG@10 unpooled and
#             Ward-pooled at factors 2 and 4, exact MaxSim; each result's qrels file is checked to be qrels/dev.tsv):
#             spread's exports, PyLate's folders (PyLate writes no model_type when its base folder had none, and
#             spread reads such a folder as PyLate does, by its Dense modules) and sentence-transformers 6's
#             MultiVectorEncoder folders, each read directly
#   cross-check  (CROSS_CHECK=1) the first spread model and the first sentence-transformers 6 model are also scored
#             by the libraries' scorer (bench_colbert_peer.py score: PyLate's encode and pool_embeddings_hierarchical
#             with unit cluster means, exact MaxSim, pytrec_eval); the two must agree within 1e-3. The
#             sentence-transformers 6 folder goes to that scorer as a PyLate-form copy (to-pylate: the same weights
#             and tokenizer) whose token vectors must equal sentence-transformers 6's own on the folder (the split's
#             first 8 queries and 8 documents, within 1e-4)
#   pooling   (POOL_ROUNDS > 0) Ward pooling at factor 4 of the same POOL_DOCS document vectors (the spread model
#             with the best factor-4 nDCG@10, encoded by PyLate), one thread, alternating, POOL_ROUNDS rounds:
#             `spread pool` (the time it reports for the pooling itself, without reading and writing the .npy files,
#             beside the whole command's wall time) against PyLate's pool_embeddings_hierarchical and
#             sentence-transformers 6's HierarchicalTokenPooling (in-process calls on tensors already in memory, the
#             median of 3 after a warm-up).
# The arms run in order rotated by the seed (seed 1: the order of ARMS; seed 2: from its second arm; ...). A job whose
# (arm, seed, steps, threads) row is in BENCH_DIR/results.jsonl already is not run again, so a long bench can be run in
# parts (ARMS and SEEDS subsets) into one BENCH_DIR and summarised together. Each job
# appends a JSON line to BENCH_DIR/results.jsonl (with the CPU model and the thread count); the summary is printed
# last: per arm and seed, the mean over seeds, the paired difference *_pa - *_plain at factor 4 (per seed, mean, and
# a 95% bootstrap interval over the dev claims: per-claim differences averaged over seeds, 10,000 resamples), the
# share of the unpooled nDCG@10 kept, the peer / spread time ratios, and the peer targets.
# Not as the design: spread holds 1 pair of the mined file out for its validation loss (data.val_fraction's minimum
# 0.001; the peers train on every pair); PyLate 1.6 has no pooling-aware loss, so it has no _pa arm.
#   bench/bench_colbert.sh     (SEEDS="1 2 3" ARMS="spread_plain spread_pa pylate_plain st6_plain st6_pa" STEPS=104
#                               THREADS=2 BENCH_DIR=/tmp/spread_bench_colbert BUILD=build CROSS_CHECK=1
#                               POOL_ROUNDS=3 POOL_DOCS=1000)
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
data=${SPREAD_DATA:-../shared/data}
scifact=$data/scifact-train
[[ -d $scifact ]] || { echo "bench_colbert: skipped: no $scifact (set SPREAD_DATA to the data root)"; exit 0; }
model=$(scripts/get_model.sh | tail -1) ||
  { echo "bench_colbert: skipped: scripts/get_model.sh found no model"; exit 0; }
build=${BUILD:-build}
spread=$build/spread
if [[ $build == build && ! -x $spread ]]; then scripts/build.sh --target spread > /dev/null; fi
[[ -x $spread ]] || { echo "bench_colbert: no $spread (build it, or set BUILD to a build folder)" >&2; exit 1; }
python=$(scripts/python_env.sh | tail -1)
seeds=${SEEDS:-1 2 3} steps=${STEPS:-104} threads=${THREADS:-2}
read -r -a arms <<< "${ARMS:-spread_plain spread_pa pylate_plain st6_plain st6_pa}"
cross_check=${CROSS_CHECK:-1} pool_rounds=${POOL_ROUNDS:-3} pool_docs=${POOL_DOCS:-1000}
bench_dir=${BENCH_DIR:-/tmp/spread_bench_colbert}
peers=""
# The second environment serves the st6 arms, their cross-check and the pooling timings, whichever arms run now.
if ! peers=$(scripts/python_env.sh --peers | tail -1); then
  peers=""
  echo "bench_colbert: no sentence-transformers 6 environment (scripts/python_env.sh --peers failed):" \
    "st6 arms, their cross-check and pooling skipped"
  read -r -a arms <<< "$(printf '%s\n' "${arms[@]}" | grep -v '^st6_' | tr '\n' ' ')"
fi
mkdir -p "$bench_dir"
results=$bench_dir/results.jsonl
export OMP_NUM_THREADS=$threads MKL_NUM_THREADS=$threads HF_HUB_OFFLINE=1
export TRANSFORMERS_VERBOSITY=error TOKENIZERS_PARALLELISM=false
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
echo "bench_colbert: $cpu, $threads threads; spread $(git rev-parse --short HEAD) ($spread); arms ${arms[*]};" \
  "seeds $seeds; $steps steps; results in $results"

split=$bench_dir/scifact-split
"$spread" split --beir "$scifact" --out "$split" --dev-fraction 0.1 --seed 1
mined=$bench_dir/mined.jsonl
if [[ ! -s $mined ]]; then
  "$spread" mine --model "$model" --beir "$split" --qrels train --num-negatives 1 --range-min 10 --range-max 50 \
    --absolute-margin 0.05 --out "$mined" 2> "$bench_dir/mine.log"
fi
echo "  mined pairs: $(wc -l < "$mined") in $mined"

# timed NAME CMD...: runs CMD under /usr/bin/time; prints "SECONDS PEAK_RSS_MIB"; CMD's output goes to NAME.log.
timed() {
  local name=$1
  shift
  /usr/bin/time -f '%e %M' -o "$bench_dir/$name.time" "$@" > "$bench_dir/$name.log" 2>&1 ||
    { echo "bench_colbert: $name failed:" >&2; tail -5 "$bench_dir/$name.log" >&2; return 1; }
  awk '{printf "%s %.0f\n", $1, $2 / 1024}' "$bench_dir/$name.time"
}
record() { echo "$1" >> "$results"; echo "  $1"; }
# done_before ARM SEED: results.jsonl holds that training job at these steps and threads (so the bench resumes where
# an interrupted or partial invocation stopped, and arms can be run in separate invocations).
done_before() {
  [[ -s $results ]] && "$python" - "$results" "$1" "$2" "$steps" "$threads" <<'PY'
import json, sys
path, arm, seed, steps, threads = sys.argv[1:]
rows = [json.loads(line) for line in open(path, encoding="utf-8")]
sys.exit(not any(r["job"] == "train" and r["arm"] == arm and r["seed"] == int(seed) and r["steps"] == int(steps)
                 and r["threads"] == int(threads) for r in rows))
PY
}

spread_job() {  # spread_job ARM SEED OUT
  local arm=$1 seed=$2 out=$3 name=${1}_$2 pa=false
  [[ $arm == spread_pa ]] && pa=true
  rm -rf "${bench_dir:?}/runs/$name" "$out"
  # One timed command for the whole job: train, then export the last step.
  # shellcheck disable=SC2016
  timed "job_$name" bash -c '"$1" train "${@:4}" && "$1" export --run "$2" --out "$3"' _ \
    "$spread" "$bench_dir/runs/$name" "$out" recipes/colbert_minilm_scifact.toml \
    --set data.path="$mined" --set data.val_fraction=0.001 --set train.init_from="$model" \
    --set eval.beir="" --set eval.qrels="" --set run.name="$name" --set run.out_dir="$bench_dir/runs" \
    --set run.seed="$seed" --set run.threads="$threads" --set train.max_steps="$steps" --set train.eval_every=0 \
    --set train.keep_best="" --set train.ckpt_every="$steps" --set model.dropout=0.1 \
    --set loss.pooling_aware.enabled=$pa --set loss.pooling_aware.pool_factor=4
}

peer_job() {  # peer_job ARM SEED OUT
  local arm=$1 seed=$2 out=$3 system=pylate py=$python pa=0
  [[ $arm == st6_* ]] && system=st6 py=$peers
  [[ $arm == *_pa ]] && pa=1
  rm -rf "$out" "$out.trainer" "$out.pylate"
  timed "job_${arm}_$seed" "$py" bench/bench_colbert_peer.py --system $system --pooling-aware $pa --model "$model" \
    --pairs "$mined" --out "$out" --steps "$steps" --batch 16 --lr 3e-5 --warmup-steps 10 --weight-decay 0.01 \
    --seed "$seed" --threads "$threads" --query-length 32 --document-length 180 --pool-factor 4
}

# scorable ARM OUT -> prints "FOLDER|SCORER" (the folder spread eval reads, and how)
scorable() {
  case $1 in
    spread_*) echo "$2|spread eval of spread's export" ;;
    pylate_*) echo "$2|spread eval of PyLate's folder" ;;
    st6_*) echo "$2|spread eval of sentence-transformers 6's folder" ;;
  esac
}

echo "== training: seeds $seeds; arms ${arms[*]}"
for seed in $seeds; do
  offset=$(( (seed - 1) % ${#arms[@]} ))
  for arm in "${arms[@]:offset}" "${arms[@]:0:offset}"; do
    out=$bench_dir/out_${arm}_$seed
    if done_before "$arm" "$seed"; then
      echo "  $arm seed $seed: in $results already (delete its row to run it again)"
      continue
    fi
    if [[ $arm == spread_* ]]; then
      read -r s rss < <(spread_job "$arm" "$seed" "$out")
    else
      read -r s rss < <(peer_job "$arm" "$seed" "$out")
    fi
    IFS='|' read -r folder scorer < <(scorable "$arm" "$out")
    eval_json=$bench_dir/eval_${arm}_$seed.json
    "$spread" eval --model "$folder" --beir "$split" --qrels dev --pool-factors 1,2,4 --per-query --json \
      2> "$bench_dir/eval_${arm}_$seed.log" | tail -1 > "$eval_json"
    row=$("$python" - "$arm" "$seed" "$steps" "$s" "$rss" "$eval_json" "$scorer" "$cpu" \
      "$threads" "$bench_dir/job_${arm}_$seed.log" "$bench_dir/runs/${arm}_$seed/metrics.jsonl" "$out" <<'PY'
import json, sys
arm, seed, steps, seconds, rss, eval_json, scorer, cpu, threads, log, metrics, out = sys.argv[1:]
row = {"job": "train", "arm": arm, "system": arm.split("_")[0], "seed": int(seed), "steps": int(steps),
       "seconds": float(seconds), "peak_rss_mib": int(rss)}
if arm.startswith("spread"):  # spread's losses from the run's metrics.jsonl
    losses = [m["loss"] for m in map(json.loads, open(metrics, encoding="utf-8")) if "loss" in m and "step" in m]
    row.update(train_seconds=None, first_loss=losses[0] if losses else None, last_loss=losses[-1] if losses else None)
else:  # the peer's JSON line
    peer = json.loads(open(log, encoding="utf-8").read().strip().splitlines()[-1])
    row.update(train_seconds=peer["train_seconds"], first_loss=peer["first_loss"], last_loss=peer["last_loss"])
beir = json.load(open(eval_json, encoding="utf-8"))["beir"]
if not beir["qrels"].endswith("qrels/dev.tsv"):
    sys.exit(f"bench_colbert: {eval_json} scored {beir['qrels']}, not the dev claims (qrels/dev.tsv)")
results = beir["results"]
row["ndcg@10"] = {f"{r['pool_factor']:g}": r["ndcg@10"] for r in results}
row["vectors_per_doc"] = {f"{r['pool_factor']:g}": round(r["vectors_per_doc"], 2) for r in results}
row.update(scorer=scorer, out=out, eval=eval_json, cpu=cpu, threads=int(threads))
print(json.dumps(row))
PY
)
    record "$row"
  done
done

# crosscheck ARM SEED: the saved model scored by the libraries' scorer (bench_colbert_peer.py score: PyLate's encode
# and pooling, exact MaxSim, pytrec_eval) against its spread eval row. A sentence-transformers 6 folder is scored
# through its PyLate-form copy (to-pylate), whose token vectors must first equal sentence-transformers 6's own on the
# split's first 8 queries and 8 documents (within 1e-4): so spread's reading of the folder is judged by both libraries.
crosscheck() {
  local arm=$1 seed=$2 out=$bench_dir/out_${1}_$2 diff=null
  local model=$out
  echo "== cross-check: $out scored by the libraries' scorer (bench_colbert_peer.py score) against spread eval"
  if [[ $arm == st6_* ]]; then
    model=$out.pylate
    "$python" bench/bench_colbert_peer.py to-pylate "$out" "$model" > /dev/null
    "$peers" bench/bench_colbert_peer.py vectors --system st6 --model "$out" --beir "$split" --n 8 \
      --out "$out.st6_vectors.npz" > /dev/null 2>&1
    "$python" bench/bench_colbert_peer.py vectors --system pylate --model "$model" --beir "$split" --n 8 \
      --out "$out.pylate_vectors.npz" > /dev/null 2>&1
    diff=$("$python" bench/bench_colbert_peer.py compare "$out.st6_vectors.npz" "$out.pylate_vectors.npz" |
      "$python" -c 'import json, sys; print(json.load(sys.stdin)["max_abs_diff"])')
  fi
  "$python" bench/bench_colbert_peer.py score --model "$model" --beir "$split" --qrels dev --pool-factors 1,2,4 \
    --threads "$threads" 2> "$bench_dir/crosscheck_$arm.log" | tail -1 > "$bench_dir/crosscheck_$arm.json"
  record "$("$python" - "$bench_dir/crosscheck_$arm.json" "$bench_dir/eval_${arm}_$seed.json" "$arm" "$seed" "$cpu" \
    "$threads" "$diff" <<'PY'
import json, sys
library = {f"{r['pool_factor']:g}": r["ndcg@10"] for r in json.load(open(sys.argv[1]))["results"]}
spread = {f"{r['pool_factor']:g}": r["ndcg@10"] for r in json.load(open(sys.argv[2]))["beir"]["results"]}
worst = max(abs(library[f] - spread[f]) for f in spread)
vectors = None if sys.argv[7] == "null" else float(sys.argv[7])
agree = worst <= 1e-3 and (vectors is None or vectors <= 1e-4)
print(json.dumps({"job": "crosscheck", "arm": sys.argv[3], "seed": int(sys.argv[4]), "spread_eval": spread,
                  "library_scorer": library, "max_abs_diff": worst, "copy_vectors_max_abs_diff": vectors,
                  "agree_within_1e-3": agree, "cpu": sys.argv[5], "threads": int(sys.argv[6])}))
PY
)"
}

if [[ $cross_check == 1 ]]; then
  first_seed=${seeds%% *}
  groups=("spread_plain spread_pa")
  [[ -n $peers ]] && groups+=("st6_plain st6_pa")
  for group in "${groups[@]}"; do
    for candidate in $group; do
      if [[ -d $bench_dir/out_${candidate}_$first_seed && -s $bench_dir/eval_${candidate}_$first_seed.json ]]; then
        crosscheck "$candidate" "$first_seed"
        break
      fi
    done
  done
fi

if (( pool_rounds > 0 )); then
  best=$("$python" - "$results" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
spread = [r for r in rows if r["job"] == "train" and r["system"] == "spread"]
if spread:
    best = max(spread, key=lambda r: r["ndcg@10"]["4"])
    print(best["out"])
PY
)
  if [[ -n $best && -d $best ]]; then
    docs=$bench_dir/pool_docs
    rm -rf "$docs" "$bench_dir/pool_out"
    "$python" bench/bench_colbert_peer.py doc-vectors --model "$best" --beir "$split" --n "$pool_docs" --out "$docs" \
      > /dev/null 2>&1
    echo "== Ward pooling at factor 4, one thread: $pool_docs documents of $best, $pool_rounds rounds"
    for round in $(seq "$pool_rounds"); do
      order=(spread pylate st6)
      (( round % 3 == 2 )) && order=(pylate st6 spread)
      (( round % 3 == 0 )) && order=(st6 spread pylate)
      for who in "${order[@]}"; do
        case $who in
          spread)
            rm -rf "$bench_dir/pool_out"
            start=$(date +%s.%N)
            line=$("$spread" pool --in "$docs" --out "$bench_dir/pool_out" --pool-factor 4 --threads 1 2> /dev/null)
            end=$(date +%s.%N)
            json=$("$python" - "$line" "$start" "$end" <<'PY'
import json, re, sys
m = re.search(r"pooled (\d+) documents: \d+ tokens -> \d+ vectors \([\d.]+ -> ([\d.]+) per document\) in [\d.]+ s "
              r"\(pooling ([\d.]+) s", sys.argv[1])
documents, per_doc, seconds = int(m.group(1)), float(m.group(2)), float(m.group(3))
wall = float(sys.argv[3]) - float(sys.argv[2])
print(json.dumps({"seconds": seconds, "documents": documents, "ms_per_doc": 1e3 * seconds / documents,
                  "vectors_per_doc": per_doc, "command_seconds": round(wall, 3),
                  "command_ms_per_doc": 1e3 * wall / documents}))
PY
) ;;
          pylate)
            json=$("$python" bench/bench_colbert_peer.py pool --system pylate --in "$docs" --pool-factor 4 \
              2> /dev/null) ;;
          st6)
            [[ -n $peers ]] || continue
            json=$("$peers" bench/bench_colbert_peer.py pool --system st6 --in "$docs" --pool-factor 4 2> /dev/null) ;;
        esac
        row=$("$python" -c 'import json, sys; r = json.loads(sys.argv[1]); print(json.dumps(
          {"job": "pool", "system": sys.argv[2], "round": int(sys.argv[3]), **r, "cpu": sys.argv[4], "threads": 1}))' \
          "$json" "$who" "$round" "$cpu")
        record "$row"
      done
    done
  fi
fi

"$python" - "$results" <<'PY'
import json, statistics, sys
import numpy as np
rows = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
train = [r for r in rows if r["job"] == "train"]
if train:
    print(f"bench_colbert: {train[-1]['cpu']}, {train[-1]['threads']} threads")
arms = list(dict.fromkeys(r["arm"] for r in train))
by = {(r["arm"], r["seed"]): r for r in train}  # the newest row of each (arm, seed)
print(f"{'arm':<13} {'seed':>4} {'nDCG@10':>8} {'f=2':>7} {'f=4':>7} {'kept 2':>7} {'kept 4':>7} {'seconds':>8} "
      f"{'RSS MiB':>8} {'loss first -> last':>20}  scorer")
mean = {}
for arm in arms:
    mine = sorted((r for (a, _), r in by.items() if a == arm), key=lambda r: r["seed"])
    for r in mine:
        n = r["ndcg@10"]
        loss = (f"{r['first_loss']:.3f} -> {r['last_loss']:.3f}" if r["first_loss"] is not None else "-")
        print(f"{arm:<13} {r['seed']:>4} {n['1']:>8.4f} {n['2']:>7.4f} {n['4']:>7.4f} {n['2'] / n['1']:>7.1%} "
              f"{n['4'] / n['1']:>7.1%} {r['seconds']:>8.1f} {r['peak_rss_mib']:>8} {loss:>20}  {r['scorer']}")
    m = {f: statistics.mean(r["ndcg@10"][f] for r in mine) for f in ("1", "2", "4")}
    m["seconds"] = statistics.mean(r["seconds"] for r in mine)
    mean[arm] = m
    print(f"{arm:<13} {'mean':>4} {m['1']:>8.4f} {m['2']:>7.4f} {m['4']:>7.4f} {m['2'] / m['1']:>7.1%} "
          f"{m['4'] / m['1']:>7.1%} {m['seconds']:>8.1f} {max(r['peak_rss_mib'] for r in mine):>8}  "
          f"({len(mine)} seeds)")


def per_query_at_4(row):
    for result in json.load(open(row["eval"], encoding="utf-8"))["beir"]["results"]:
        if result["pool_factor"] == 4:
            return {q: v["ndcg@10"] for q, v in result["per_query"].items()}


for pa, plain in (("spread_pa", "spread_plain"), ("st6_pa", "st6_plain")):
    seeds = sorted(s for (a, s) in by if a == pa and (plain, s) in by)
    if not seeds:
        continue
    diffs = [by[(pa, s)]["ndcg@10"]["4"] - by[(plain, s)]["ndcg@10"]["4"] for s in seeds]
    a = [per_query_at_4(by[(pa, s)]) for s in seeds]
    b = [per_query_at_4(by[(plain, s)]) for s in seeds]
    claims = sorted(a[0])
    per_claim = np.array([statistics.mean(x[q] - y[q] for x, y in zip(a, b)) for q in claims])
    rng = np.random.default_rng(0)
    boot = per_claim[rng.integers(0, len(claims), size=(10_000, len(claims)))].mean(axis=1)
    low, high = np.percentile(boot, [2.5, 97.5])
    print(f"{pa} - {plain} at pool factor 4, per seed: " + " ".join(f"{d:+.4f}" for d in diffs)
          + f"; mean {statistics.mean(diffs):+.4f}, 95% bootstrap over {len(claims)} dev claims "
          f"[{low:+.4f}, {high:+.4f}]")

for peer, ours in (("pylate_plain", "spread_plain"), ("st6_plain", "spread_plain"), ("st6_pa", "spread_pa")):
    seeds = sorted(s for (a, s) in by if a == peer and (ours, s) in by)
    if not seeds:
        continue
    ratios = [by[(peer, s)]["seconds"] / by[(ours, s)]["seconds"] for s in seeds]
    targets = "; ".join(
        f"{label} {mean[ours][f] - mean[peer][f]:+.4f} "
        f"({'met' if mean[ours][f] >= mean[peer][f] - 0.005 else 'MISSED'})"
        for label, f in (("unpooled", "1"), ("f=4", "4")))
    print(f"{peer} / {ours} wall time per seed: " + " ".join(f"{x:.2f}x" for x in ratios)
          + f" (mean {statistics.mean(ratios):.2f}x, target 1.25x); nDCG@10 {ours} - {peer}: {targets} "
          f"(target >= -0.005)")

for r in (r for r in rows if r["job"] == "crosscheck"):
    print(f"cross-check {r['arm']} seed {r['seed']}: spread eval against the libraries' scorer, largest nDCG@10 "
          f"difference {r['max_abs_diff']:.2e} ({'agree' if r['agree_within_1e-3'] else 'DISAGREE'} within 1e-3)"
          + ("" if r.get("copy_vectors_max_abs_diff") is None else
             f"; the PyLate-form copy's token vectors against sentence-transformers 6's: largest difference "
             f"{r['copy_vectors_max_abs_diff']:.2e}"))

pool = [r for r in rows if r["job"] == "pool"]
if pool:
    parts = []
    for system in ("spread", "pylate", "st6"):
        mine = [r for r in pool if r["system"] == system]
        if mine:
            text = f"{system} {statistics.median(r['ms_per_doc'] for r in mine):.3f} ms"
            if system == "spread":
                text += f" ({statistics.median(r['command_ms_per_doc'] for r in mine):.3f} ms the whole command)"
            parts.append(text)
    print(f"Ward pooling at factor 4, one thread, per document (medians over {max(r['round'] for r in pool)} rounds, "
          f"{pool[0]['documents']} documents): " + ", ".join(parts))
PY
