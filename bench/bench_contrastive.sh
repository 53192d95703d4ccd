#!/usr/bin/env bash
# Contrastive training (docs/design.md §5) of spread against plain PyTorch: bench/st_ref.py is the same encoder, mean
# pooling and in-batch InfoNCE as sentence-transformers' MultipleNegativesRankingLoss trains it. One shape:
#   4 layers, 4 heads, width 256, max_length 64, batch 64 pairs, BPE vocabulary 4096 (+ the reserved ids), dropout 0.1.
# Speed: training pairs/s (median over the logged windows after the first) and encoding texts/s (`spread encode`'s
#   final rate over ENCODE_TEXTS texts, tokenization included; the reference gets token ids, so it has none),
#   alternating spread and the reference over ROUNDS rounds (spread first in odd rounds, the reference first in
#   even ones), so each round's ratio is measured within minutes, not across drift.
# Memory: spread's peak RSS (metrics.jsonl's "end" line) in cached mode (GradCache) at batch 512 with mini-batches
#   of 32, against plain batch 32 (target: at most 1.3x), and with PLAIN512=1 plain batch 512 (what the cache
#   saves); the same for the reference (its ru_maxrss, st_ref.py --cached 32) when it runs.
# Data: a seeded pairs file of synthetic sentences (3-30 WordNet lemmas drawn with Zipf weights; the positive is the
#   anchor with about 30% of its words replaced and its end changed). The reference has no tokenizer: it gets the
#   token lengths of the same texts under the run's own tokenizer (needs python3-sentencepiece for Debian's python),
#   or without that module an estimate from word counts, tokens = 1.66 words + 3.8 capped at max_length (fitted on
#   this generator at vocab 4096: the same mean and spread of lengths, not the same texts; the script says which).
#   With sentencepiece the script also checks that the two are one model: st_ref.py --mode check loads round 1's
#   trained weights and must give `spread encode`'s embeddings of 256 texts to 1e-4.
# Usage: bench/bench_contrastive.sh
# Environment: ROUNDS (3) STEPS (40, at least 10) ENCODE_TEXTS (20000) MEM_STEPS (4, even) ROWS (20000 pairs)
#   PLAIN512 (0), and the shape:
#   N_LAYER (4) N_HEAD (4) N_EMBD (256) MAX_LENGTH (64) BATCH (64) VOCAB (4096); ST_PYTHON (/usr/bin/python3).
# Prints a table and, last, one JSON line with every number.
set -euo pipefail
shopt -s inherit_errexit  # a failing command inside $(...) stops the script too
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-3} steps=${STEPS:-40} encode_texts=${ENCODE_TEXTS:-20000} mem_steps=${MEM_STEPS:-4}
rows=${ROWS:-20000} n_layer=${N_LAYER:-4} n_head=${N_HEAD:-4} n_embd=${N_EMBD:-256} max_length=${MAX_LENGTH:-64}
batch=${BATCH:-64} vocab=${VOCAB:-4096}
(( steps >= 10 && mem_steps >= 2 && mem_steps % 2 == 0 )) || { echo "needs STEPS >= 10, MEM_STEPS even >= 2"; exit 2; }
[[ -d /usr/share/wordnet ]] || { echo "no /usr/share/wordnet (scripts/install_deps.sh installs wordnet-base)"; exit 2; }
scripts/build.sh --target spread >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# --- data: pairs.tsv, and texts.txt = the anchors and positives of its first ENCODE_TEXTS / 2 rows, a0 p0 a1 p1 ...
python3 - "$out" "$rows" "$encode_texts" <<'PY'
import glob, random, sys
out, rows, encode_texts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
words = set()
for path in glob.glob("/usr/share/wordnet/index.*"):
    if path.endswith("index.sense"):
        continue
    for line in open(path, encoding="latin-1"):
        w = line.split(" ", 1)[0]
        if not line.startswith(" ") and w.isascii() and w.isalpha():
            words.add(w.lower())
rnd = random.Random(1337)
words = sorted(words)
rnd.shuffle(words)
words = words[:8000]
weights = [1.0 / (rank + 5) for rank in range(len(words))]  # Zipf-like word frequencies
sentence = lambda n: rnd.choices(words, weights, k=n)
pairs = []
for _ in range(rows):
    a = sentence(rnd.randint(3, 30))
    p = [w if rnd.random() > 0.3 else sentence(1)[0] for w in a]
    p = p[:max(2, len(p) - rnd.randint(0, 3))] + sentence(rnd.randint(0, 3))
    pairs.append((" ".join(a).capitalize() + ".", " ".join(p).capitalize() + "."))
with open(out + "/pairs.tsv", "w") as f:
    f.write("anchor\tpositive\n" + "".join(f"{a}\t{p}\n" for a, p in pairs))
with open(out + "/texts.txt", "w") as f:
    f.write("".join(f"{a}\n{p}\n" for a, p in pairs[:encode_texts // 2]))
PY
printf '[run]\nname = "bench_contrastive"\n' >"$out/recipe.toml"

common=(--set run.out_dir="$out" --set train.objective=contrastive --set data.source=pairs
        --set data.path="$out/pairs.tsv" --set data.max_length="$max_length" --set tokenizer.kind=bpe
        --set tokenizer.vocab_size="$vocab" --set model.causal=false --set model.n_layer="$n_layer"
        --set model.n_head="$n_head" --set model.n_embd="$n_embd" --set model.block_size="$max_length"
        --set model.dropout=0.1 --set train.eval_every=0 --set diagnostics.every=0)
harness() { python3 bench/harness.py "$@"; }  # medians, ratios, JSON lines (bench/harness.py)
json_field() { harness field "$1" "$2"; }  # KEY of the last JSON line of a command's output
file_field() { harness field --file "$1" "$2"; }
spread_train() {  # NAME ARGS...: trains a run in $out/NAME
  local name=$1; shift
  build/spread train "$out/recipe.toml" --set run.name="$name" "${common[@]}" "$@" >"$out/$name.log"
}
# Median pairs/s over the logged windows after the first (step 1 is logged alone, then every log_every steps).
spread_pairs_per_s() {
  python3 - "$out/$1/metrics.jsonl" "$2" <<'PY'
import json, statistics, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
rates = [l["pairs_per_s"] for l in lines if "pairs_per_s" in l and l["step"] > int(sys.argv[2])]
print(round(statistics.median(rates), 1))
PY
}
spread_rss() {
  python3 -c 'import json,sys; print(round([json.loads(l) for l in open(sys.argv[1])][-1]["peak_rss_mib"]))' \
    "$out/$1/metrics.jsonl"
}
# texts/s of `spread encode`: its last progress line, "encoding N/N texts | R texts/s | ETA 0s" (the rate since the
# texts were read: tokenization and forward passes, not loading the run or writing the .npy).
spread_encode() {
  build/spread encode --run "$out/$1" --in "$out/texts.txt" --out "$out/$1.npy" --batch-size "$batch" \
    >/dev/null 2>"$out/$1.encode.log"
  grep -o '[0-9.]* texts/s' "$out/$1.encode.log" | tail -1 | cut -d' ' -f1
}
median() { harness median --digits 2 "$@"; }
ratio_of() { harness ratio --digits 2 "$1" "$2"; }
row() { printf '%-24s %10s %10s  %s\n' "$@"; }

ref_python=${ST_PYTHON:-/usr/bin/python3}
have_ref=0
"$ref_python" -c 'import torch' 2>/dev/null && have_ref=1
[[ $have_ref == 1 ]] || echo "(no PyTorch reference: $ref_python cannot import torch; apt-get install python3-torch)"
ref_shape=(--n-layer "$n_layer" --n-head "$n_head" --n-embd "$n_embd" --block "$max_length"
           --max-len "$max_length" --lengths "$out/lengths.txt")  # --vocab: round 1's, see prepare_reference
ref_env=()
reference() {  # ARGS...: one st_ref.py run, its JSON line
  env "${ref_env[@]}" "$ref_python" bench/st_ref.py "${ref_shape[@]}" "$@"
}

# The reference's token lengths: the same texts under round 1's tokenizer (or the word-count estimate), and its
# BLAS core: the one spread chose itself, if it did (as bench_lm.sh).
prepare_reference() {
  local run=$out/$1 lengths_kind
  # The embedding table's rows: the tokenizer's vocabulary and the reserved ids after it ([PAD] [CLS] [SEP] [MASK]
  # [Q] [D] today), read from the run rather than counted here.
  ref_shape+=(--vocab "$(python3 -c 'import json,sys; t = json.load(open(sys.argv[1]))
print(max([t["vocab_size"] - 1, *t["special_tokens"].values()]) + 1)' "$run/tokenizer.json")")
  lengths_kind=$("$ref_python" - "$out/pairs.tsv" "$run/tokenizer.model" "$max_length" "$out/lengths.txt" <<'PY'
import sys
pairs, model, max_length, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
texts = [line.rstrip("\n").split("\t") for line in open(pairs, encoding="utf-8")][1:]
try:
    import sentencepiece
    sp = sentencepiece.SentencePieceProcessor(model_file=model)
    count, kind = lambda t: len(sp.encode(t)), "exact (the run's tokenizer)"
except (ImportError, OSError, RuntimeError):
    count, kind = lambda t: round(1.66 * len(t.split()) + 1.8), "estimated from word counts (no sentencepiece module)"
# encode_for_encoder: [CLS] text [SEP], the text cut to max_length - 2 tokens.
with open(out, "w") as f:
    f.write("".join(" ".join(str(min(count(t), max_length - 2) + 2) for t in pair) + "\n" for pair in texts))
print(kind)
PY
)
  echo "reference token lengths: $lengths_kind"
  # The same model: spread's trained weights in st_ref.py's encoder give spread's embeddings (needs sentencepiece).
  if "$ref_python" -c 'import sentencepiece' 2>/dev/null; then
    local r diff
    head -n 256 "$out/texts.txt" >"$out/check.txt"
    build/spread encode --run "$run" --in "$out/check.txt" --out "$out/check.npy" --no-normalize >/dev/null 2>&1
    r=$(reference --mode check --check-run "$run" --check-texts "$out/check.txt" --check-npy "$out/check.npy")
    diff=$(python3 -c 'import sys; print(f"{float(sys.argv[1]):.1e}")' "$(json_field "$r" max_abs_diff)")
    if python3 -c 'import sys; sys.exit(float(sys.argv[1]) <= 1e-4)' "$diff"; then
      echo "st_ref.py's model differs from spread's: embeddings of the same weights differ by up to $diff"
      exit 1
    fi
    echo "reference model check: with spread's weights, st_ref.py's embeddings of 256 texts are spread's to $diff"
  fi
  if [[ "$(file_field "$run/run.json" blas_coretype_origin)" == "spread (auto"* ]]; then
    ref_env=(OPENBLAS_CORETYPE="$(file_field "$run/run.json" blas_core)")
  fi
}

# Sets ref_train, ref_encode and ref_parameters.
run_reference() {
  local r
  r=$(reference --mode train --batch "$batch" --steps "$steps" --window 5)
  [[ $round == 1 ]] && echo "PyTorch reference: $r"
  ref_parameters=$(json_field "$r" parameters)
  ref_train=$(json_field "$r" pairs_per_s)
  ref_encode=$(json_field "$(reference --mode encode --batch "$batch" --texts "$encode_texts")" texts_per_s)
}

speed_args=(--set train.batch_size="$batch" --set train.max_steps="$steps" --set train.log_every=5
            --set train.ckpt_every="$steps")  # one checkpoint, after the last timed window, for `spread encode`
train_ratios=() encode_ratios=() spread_train_rates=() ref_train_rates=() spread_encode_rates=() ref_encode_rates=()
parameters="" ref_parameters=""
row "case" "pairs/s" "texts/s" "x PyTorch (train / encode)"
for round in $(seq "$rounds"); do
  ref_train="" ref_encode=""
  # Round 1 runs spread first: the reference's token lengths come from its tokenizer.
  if [[ $have_ref == 1 && $((round % 2)) == 0 ]]; then run_reference; fi
  spread_train "speed$round" "${speed_args[@]}"
  parameters=$(file_field "$out/speed$round/run.json" parameters)
  s_train=$(spread_pairs_per_s "speed$round" 5)
  s_encode=$(spread_encode "speed$round")
  spread_train_rates+=("$s_train") spread_encode_rates+=("$s_encode")
  if [[ $have_ref == 1 ]]; then
    [[ $round == 1 ]] && prepare_reference "speed$round"
    [[ -z $ref_train ]] && run_reference
    if [[ "$ref_parameters" != "$parameters" ]]; then
      echo "parameter counts differ: spread $parameters, reference $ref_parameters (the models are not the same)"
      exit 1
    fi
    ref_train_rates+=("$ref_train") ref_encode_rates+=("$ref_encode")
    train_ratios+=("$(ratio_of "$s_train" "$ref_train")") encode_ratios+=("$(ratio_of "$s_encode" "$ref_encode")")
    row "PyTorch (round $round)" "$ref_train" "$ref_encode"
    row "spread (round $round)" "$s_train" "$s_encode" "${train_ratios[-1]} / ${encode_ratios[-1]}"
  else
    row "spread (round $round)" "$s_train" "$s_encode" "-"
  fi
done
echo "parameters: $parameters (spread's run.json)${ref_parameters:+, reference $ref_parameters}"
if [[ $have_ref == 1 ]]; then
  echo "spread / PyTorch, median of $rounds round(s): training $(median "${train_ratios[@]}")x," \
       "encoding $(median "${encode_ratios[@]}")x"
fi

# --- memory: short runs, peak RSS at the end of each. Plain batch 512 holds the graph of 1024 texts (several GiB,
# more in the reference), so it runs only with PLAIN512=1.
mem_args=(--set train.max_steps="$mem_steps" --set train.log_every="$mem_steps" --set train.ckpt_every=0)
mem_cases=("cached: batch 512, mini-batches of 32" "plain: batch 32")
spread_mem_args=("--set train.batch_size=512 --set loss.contrastive.mini_batch=32" "--set train.batch_size=32")
ref_mem_args=("--batch 512 --cached 32" "--batch 32")
if [[ ${PLAIN512:-0} == 1 ]]; then
  mem_cases+=("plain: batch 512") spread_mem_args+=("--set train.batch_size=512") ref_mem_args+=("--batch 512")
fi
spread_rss_mib=() ref_rss_mib=()
for i in "${!mem_cases[@]}"; do
  read -ra extra <<<"${spread_mem_args[$i]}"
  spread_train "mem$i" "${mem_args[@]}" "${extra[@]}"
  spread_rss_mib+=("$(spread_rss "mem$i")")
  if [[ $have_ref == 1 ]]; then
    read -ra extra <<<"${ref_mem_args[$i]}"
    r=$(reference --mode train --steps "$mem_steps" --window $((mem_steps / 2)) "${extra[@]}")
    ref_rss_mib+=("$(json_field "$r" peak_rss_mib)")
  fi
done
rss_ratio=$(ratio_of "${spread_rss_mib[0]}" "${spread_rss_mib[1]}")
printf '%-40s %8s %8s\n' "peak RSS, MiB ($mem_steps steps)" "spread" "PyTorch"
for i in "${!mem_cases[@]}"; do
  printf '%-40s %8s %8s\n' "${mem_cases[$i]}" "${spread_rss_mib[$i]}" "${ref_rss_mib[$i]:--}"
done
echo "spread cached 512 / plain 32: ${rss_ratio}x (target <= 1.3x)"

python3 - "$have_ref" "$parameters" "$rss_ratio" "${spread_train_rates[*]}" "${ref_train_rates[*]}" \
  "${spread_encode_rates[*]}" "${ref_encode_rates[*]}" "${train_ratios[*]}" "${encode_ratios[*]}" \
  "${spread_rss_mib[*]}" "${ref_rss_mib[*]}" <<'PY'
import json, statistics, sys
median = lambda xs: round(statistics.median(xs), 2)
have_ref, params, rss_ratio = sys.argv[1:4]
st, rt, se, re_, tr, er, srss, rrss = ([float(x) for x in s.split()] for s in sys.argv[4:12])
cases = ["cached512", "plain32", "plain512"]
result = {"parameters": int(params), "spread_pairs_per_s": st, "spread_texts_per_s": se,
          "spread_rss_mib": dict(zip(cases, srss)), "rss_cached512_over_plain32": float(rss_ratio)}
if have_ref == "1":
    result.update({"ref_pairs_per_s": rt, "ref_texts_per_s": re_, "train_ratios": tr, "encode_ratios": er,
                   "train_ratio_median": median(tr), "encode_ratio_median": median(er),
                   "ref_rss_mib": dict(zip(cases, rrss))})
print(json.dumps(result))
PY
