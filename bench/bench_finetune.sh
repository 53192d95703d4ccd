#!/usr/bin/env bash
# The whole job of fine-tuning a real model, spread against sentence-transformers doing the same job:
#   model     all-MiniLM-L6-v2 (scripts/get_model.sh), 256 tokens, mean pooling + Normalize
#   data      SciFact train (../shared/data/scifact-train), its queries split by `spread split --dev-fraction 0.1
#             --seed 1` into train (qrels/train.tsv) and dev (qrels/dev.tsv: 81 claims, scored over all 5,183
#             abstracts)
#   mining    `spread mine` against sentence-transformers' mine_hard_negatives (tests/oracles/mine_ref.py) on the train
#             pairs, MINE_OPTIONS (default: 1 negative of rank 10-50 at least 0.05 below the hardest positive),
#             alternating, wall time of each whole command; the two outputs compared row by row
#   training  batch 32, STEPS optimizer steps (default 75, about 3 epochs), lr 2e-5, 8 warmup steps then a cosine to
#             0 (the peer sets spread's schedule through a LambdaLR), AdamW (0.9, 0.95), weight decay 0.01, gradient
#             clip 1, scale 20 (temperature 0.05), dropout 0.1 (BERT's, what the library trains with), no
#             evaluation during the job; the variants:
#               mnrl        in-batch negatives    MultipleNegativesRankingLoss          loss.contrastive.mini_batch 0
#               mnrl_neg    + the mined negative  the same on (anchor, positive, negative_1)
#               cached      in-batch, cached      CachedMultipleNegativesRankingLoss(16) loss.contrastive.mini_batch 16
#               cached_neg  + the mined negative
#   the job   load, train, save: spread train + spread export of the last step; the peer's script from start to
#             model.save (bench/bench_finetune_peer.py); wall time and peak RSS from /usr/bin/time
#   scored    dev nDCG@10 of every result and of the starting model by `spread eval --model` (equal to
#             sentence-transformers' encode + MTEB's metrics: tests/test_real_model.cpp)
# Every (seed, variant) runs both, the peer first for odd seeds. Each job appends a JSON line to
# BENCH_DIR/results.jsonl; the summary (per seed, and the mean over seeds per variant and system) is printed last.
#   bench/bench_finetune.sh     (SEEDS="1 2 3" VARIANTS="mnrl mnrl_neg cached cached_neg" STEPS=75 THREADS=2
#                                  BENCH_DIR=/tmp/spread_bench_finetune MINE_ROUNDS=3)
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
data=${SPREAD_DATA:-../shared/data}
scifact=$data/scifact-train
[[ -d $scifact ]] || { echo "bench_finetune: skipped: no $scifact (set SPREAD_DATA to the data root)"; exit 0; }
model=$(scripts/get_model.sh | tail -1) || { echo "bench_finetune: skipped: scripts/get_model.sh found no model"; exit 0; }
python=$(scripts/python_env.sh | tail -1)
scripts/build.sh --target spread > /dev/null
seeds=${SEEDS:-1 2 3} variants=${VARIANTS:-mnrl mnrl_neg cached cached_neg} steps=${STEPS:-75}
threads=${THREADS:-2} mine_rounds=${MINE_ROUNDS:-3}
mine_options=${MINE_OPTIONS:---num-negatives 1 --range-min 10 --range-max 50 --absolute-margin 0.05}
bench_dir=${BENCH_DIR:-/tmp/spread_bench_finetune}
mkdir -p "$bench_dir"
results=$bench_dir/results.jsonl
# spread train takes its threads from run.threads (below); its other commands, and the peer, from OMP_NUM_THREADS.
export OMP_NUM_THREADS=$threads MKL_NUM_THREADS=$threads HF_HUB_OFFLINE=1
export TRANSFORMERS_VERBOSITY=error TOKENIZERS_PARALLELISM=false
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
echo "bench_finetune: $cpu, $threads threads; spread $(git rev-parse --short HEAD); results in $results"

split=$bench_dir/scifact-split
build/spread split --beir "$scifact" --out "$split" --dev-fraction 0.1 --seed 1

# timed NAME CMD...: runs CMD under /usr/bin/time; prints "SECONDS PEAK_RSS_MIB"; CMD's output goes to NAME.log.
timed() {
  local name=$1
  shift
  /usr/bin/time -f '%e %M' -o "$bench_dir/$name.time" "$@" > "$bench_dir/$name.log" 2>&1 ||
    { echo "bench_finetune: $name failed:" >&2; tail -5 "$bench_dir/$name.log" >&2; return 1; }
  awk '{printf "%s %.0f\n", $1, $2 / 1024}' "$bench_dir/$name.time"
}
record() { echo "$1" >> "$results"; echo "  $1"; }

echo "== mining ($mine_options), $mine_rounds rounds"
for round in $(seq "$mine_rounds"); do
  order=(spread peer)
  (( round % 2 == 1 )) && order=(peer spread)
  for who in "${order[@]}"; do
    if [[ $who == spread ]]; then
      # shellcheck disable=SC2086
      read -r s rss < <(timed mine_spread build/spread mine --model "$model" --beir "$split" --qrels train \
        $mine_options --out "$bench_dir/mined_spread.jsonl")
    else
      # shellcheck disable=SC2086
      read -r s rss < <(timed mine_peer "$python" tests/oracles/mine_ref.py --model "$model" --beir "$split" --qrels train \
        $mine_options --out "$bench_dir/mined_peer.jsonl")
    fi
    record "{\"job\": \"mine\", \"system\": \"$who\", \"round\": $round, \"seconds\": $s, \"peak_rss_mib\": $rss}"
  done
done
"$python" - "$bench_dir/mined_spread.jsonl" "$bench_dir/mined_peer.jsonl" <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
b = [json.loads(l) for l in open(sys.argv[2], encoding="utf-8")]
same = sum(x == y for x, y in zip(a, b))
print(f"  mined rows: spread {len(a)}, library {len(b)}; identical rows {same}")
PY

dev_ndcg() {  # dev_ndcg FOLDER -> nDCG@10 on the dev queries
  build/spread eval --model "$1" --beir "$split" --qrels dev --json 2> /dev/null | tail -1 |
    "$python" -c 'import json, sys; print(json.load(sys.stdin)["beir"]["ndcg@10"])'
}
base=$(dev_ndcg "$model")
record "{\"job\": \"start\", \"system\": \"both\", \"ndcg@10\": $base}"

spread_job() {  # spread_job VARIANT SEED OUT
  local variant=$1 seed=$2 out=$3 mini=0 data=(--set data.path="$split" --set data.qrels=train)
  [[ $variant == cached* ]] && mini=16
  [[ $variant == *_neg ]] && data=(--set data.source=pairs --set data.path="$bench_dir/mined_spread.jsonl")
  local name=ft_${variant}_$seed
  rm -rf "${bench_dir:?}/runs/$name" "$out"
  # One timed command for the whole job: train, then export the last step.
  timed "spread_$name" bash -c 'build/spread train "${@:3}" && build/spread export --run "$1" --out "$2"' _ \
    "$bench_dir/runs/$name" "$out" recipes/finetune_minilm_scifact.toml "${data[@]}" \
    --set train.init_from="$model" --set eval.beir="" --set eval.qrels="" --set run.name="$name" \
    --set run.out_dir="$bench_dir/runs" --set run.seed="$seed" --set run.threads="$threads" --set train.max_steps="$steps" \
    --set train.eval_every=0 --set train.keep_best="" --set train.ckpt_every="$steps" --set model.dropout=0.1 \
    --set loss.contrastive.mini_batch=$mini
}

peer_job() {  # peer_job VARIANT SEED OUT
  local variant=$1 seed=$2 out=$3 loss=mnrl data=(--beir "$split" --qrels train)
  [[ $variant == cached* ]] && loss=cached
  [[ $variant == *_neg ]] && data=(--pairs "$bench_dir/mined_spread.jsonl")
  rm -rf "$out" "$out.trainer"
  timed "peer_ft_${variant}_$seed" "$python" bench/bench_finetune_peer.py --model "$model" "${data[@]}" --out "$out" \
    --loss $loss --mini-batch 16 --batch 32 --steps "$steps" --lr 2e-5 --warmup-steps 8 --weight-decay 0.01 \
    --seed "$seed" --threads "$threads" --max-length 256
}

echo "== fine-tuning: seeds $seeds; variants $variants; $steps steps; dev nDCG@10 of the starting model $base"
for seed in $seeds; do
  for variant in $variants; do
    order=(spread peer)
    (( seed % 2 == 1 )) && order=(peer spread)
    for who in "${order[@]}"; do
      out=$bench_dir/out_${who}_${variant}_$seed
      if [[ $who == spread ]]; then
        read -r s rss < <(spread_job "$variant" "$seed" "$out")
      else
        read -r s rss < <(peer_job "$variant" "$seed" "$out")
      fi
      ndcg=$(dev_ndcg "$out")
      record "{\"job\": \"finetune\", \"system\": \"$who\", \"variant\": \"$variant\", \"seed\": $seed, \"seconds\": $s, \"peak_rss_mib\": $rss, \"ndcg@10\": $ndcg}"
    done
  done
done

# The SOCM paper's measurement on the real model before and after (the first spread result of the list below).
texts=$bench_dir/abstracts_1000.txt
"$python" - "$split/corpus.jsonl" "$texts" <<'PY'
import json, sys
with open(sys.argv[1], encoding="utf-8") as f, open(sys.argv[2], "w", encoding="utf-8") as out:
    for line in list(f)[:1000]:
        d = json.loads(line)
        out.write(" ".join((d["title"] + " " + d["text"]).split()) + "\n")
PY
for candidate in cached_neg_1 mnrl_neg_1 cached_1 mnrl_1; do
  tuned=$bench_dir/out_spread_$candidate
  [[ -d $tuned ]] || continue
  for which in start tuned; do
    folder=$model
    [[ $which == tuned ]] && folder=$tuned
    build/spread diagnose --model "$folder" --texts "$texts" --layers all --pairs 20000 --out "$bench_dir/socm_$which.json" \
      > "$bench_dir/socm_$which.log" 2>&1
  done
  echo "== SOCM on 1,000 abstracts (20,000 pairs): the starting model, then spread's $candidate"
  cat "$bench_dir/socm_start.log" "$bench_dir/socm_tuned.log"
  break
done

"$python" - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
mine = [r for r in rows if r["job"] == "mine"]
if mine:
    t = {s: statistics.median(r["seconds"] for r in mine if r["system"] == s) for s in ("spread", "peer")}
    print(f"mining: spread {t['spread']:.1f} s, library {t['peer']:.1f} s (medians): {t['peer'] / t['spread']:.2f}x")
ft = [r for r in rows if r["job"] == "finetune"]
print(f"{'variant':<11} {'system':<7} {'seeds':>5} {'nDCG@10':>8} {'(per seed)':<26} {'seconds':>8} {'RSS MiB':>8}")
for variant in dict.fromkeys(r["variant"] for r in ft):
    for system in ("spread", "peer"):
        mine_rows = sorted((r for r in ft if r["variant"] == variant and r["system"] == system), key=lambda r: r["seed"])
        if not mine_rows:
            continue
        per_seed = " ".join(f"{r['ndcg@10']:.4f}" for r in mine_rows)
        print(f"{variant:<11} {system:<7} {len(mine_rows):>5} {statistics.mean(r['ndcg@10'] for r in mine_rows):>8.4f} "
              f"{per_seed:<26} {statistics.mean(r['seconds'] for r in mine_rows):>8.1f} "
              f"{max(r['peak_rss_mib'] for r in mine_rows):>8}")
    pairs = [(s, p) for s in ft for p in ft if s["variant"] == p["variant"] == variant and s["seed"] == p["seed"]
             and s["system"] == "spread" and p["system"] == "peer"]
    if pairs:
        print(f"{'':<11} speed (peer / spread wall time, per seed): "
              + " ".join(f"{p['seconds'] / s['seconds']:.2f}x" for s, p in pairs)
              + f"; nDCG@10 difference (spread - peer): "
              + " ".join(f"{s['ndcg@10'] - p['ndcg@10']:+.4f}" for s, p in pairs))
PY
