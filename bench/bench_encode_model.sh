#!/usr/bin/env bash
# `spread encode --model` on an imported sentence-transformers folder against `SentenceTransformer.encode` of the
# same folder, on the same CPU, threads, batch size and texts (target: spread >= 1.25x).
# Model: a random all-MiniLM-L6-v2-shaped folder (BertModel, 6 layers, width 384, 12 heads, intermediate 1536,
#   max_seq_length 256, mean pooling + Normalize, bert-base-uncased's 30,522 pieces), made once by
#   `tests/oracles/hf_model_ref.py make st` with sentence-transformers' own save and cached in $BENCH_DIR.
# Texts: the first N sentences of the STS benchmark (train, then dev; sentence1 and sentence2 of each row), one a line.
# Peer (bench/bench_encode_model_peer.py): torch.set_num_threads(T), SentenceTransformer(DIR, device="cpu"),
#   one warm-up encode of the first B texts, then encode(texts, batch_size=B, convert_to_numpy=True) timed alone.
#   Its numbers: load (the SentenceTransformer(...) call), encode (the timed call), load+encode (their sum; the
#   imports, the warm-up and writing the .npy are outside it) and process (the whole python command, imports too).
# spread: `build/spread encode --model DIR --in texts.txt --out out.npy --batch-size B` under OMP_NUM_THREADS=T
#   (LibTorch's pool, which the OpenMP OpenBLAS shares; OPENBLAS_NUM_THREADS=T as well) and `--threads T` when its
#   --help lists one. Its number: the command's wall time (process start, loading the folder, tokenizing,
#   the forward passes, writing the .npy; load and encode are not separable from outside). Also shown: its
#   in-process encode time, N / the texts/s of its last progress line (tokenizing and forward passes only).
# Ratios (per round, then the median over rounds):
#   load+encode / spread wall   the headline: peer's model load + encode against spread's whole command
#   encode / spread wall        the stricter one: peer's encode call alone against spread's whole command
#   (in the JSONL also peer process / spread wall, and peer encode / spread in-process, for reference).
# Rounds alternate (peer first in odd rounds, spread first in even ones) so the machine's drift lands on both.
# Every round checks that the two embedding matrices agree: max |peer - spread| <= 1e-4, else exit 1.
#
#   bench/bench_encode_model.sh [--quick] [--texts N] [--batch B] [--threads T] [--rounds R] [--peer-only]
#
# --quick: N=200, R=1 (a smoke run; flags after it still apply). --peer-only: peer rounds only, no spread needed.
# Environment: TEXTS (2000) BATCH (32) THREADS (2) ROUNDS (3), BENCH_DIR (/tmp/spread_bench_encode_model: the
#   cached model and texts, each round's outputs and bench_encode_model.jsonl, one line appended per round),
#   SPREAD_DATA (../shared/data), BUILD (build), SPREAD_PYTHON (default: scripts/python_env.sh's python).
# Progress goes to stderr, the markdown table to stdout. Exit 0 with a line when the data is missing; exit 1 when
# build/spread is missing or has no `encode --model`, when a command fails, or when the embeddings disagree.
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."

usage() { sed -n '/^#   bench\/bench_encode_model.sh/s/^#   //p' "$0"; }
n_texts=${TEXTS:-2000} batch=${BATCH:-32} threads=${THREADS:-2} rounds=${ROUNDS:-3} peer_only=0
while (($#)); do
  case $1 in
    --quick) n_texts=200 rounds=1 ;;
    --texts) n_texts=${2:?--texts N}; shift ;;
    --batch | --batch-size) batch=${2:?--batch B}; shift ;;
    --threads) threads=${2:?--threads T}; shift ;;
    --rounds) rounds=${2:?--rounds R}; shift ;;
    --peer-only) peer_only=1 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "bench_encode_model: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
for v in "$n_texts" "$batch" "$threads" "$rounds"; do
  [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "bench_encode_model: texts, batch, threads and rounds must be positive integers (got '$v')" >&2; exit 2; }
done

data=${SPREAD_DATA:-../shared/data}
tokdir=$data/tokenizers/bert-base-uncased
stsb=$data/stsb
build=${BUILD:-build}
spread=$build/spread
bench_dir=${BENCH_DIR:-/tmp/spread_bench_encode_model}
jsonl=$bench_dir/bench_encode_model.jsonl
log() { echo "bench_encode_model: $*" >&2; }

if [[ ! -f $tokdir/tokenizer.json ]]; then
  log "skipped: no bert-base-uncased tokenizer at $tokdir (set SPREAD_DATA to the data root)"
  exit 0
fi
if [[ ! -f $stsb/stsb-en-train.csv ]]; then
  log "skipped: no STS benchmark at $stsb (stsb-en-train.csv; set SPREAD_DATA to the data root)"
  exit 0
fi

spread_flags=()
if [[ $peer_only == 0 ]]; then
  if [[ ! -x $spread ]]; then
    log "$spread does not exist: build it first (scripts/build.sh --target spread), or run with --peer-only"
    exit 1
  fi
  spread_help=$("$spread" encode --help 2>&1) || true
  if ! grep -q -- '--model' <<<"$spread_help"; then
    log "$spread encode --help lists no --model: this build cannot encode an imported model folder (rebuild it)"
    exit 1
  fi
  if grep -q -- '--threads' <<<"$spread_help"; then spread_flags+=(--threads "$threads"); fi
fi

if [[ -n ${SPREAD_PYTHON:-} ]]; then python=$SPREAD_PYTHON
elif ! python=$(scripts/python_env.sh); then
  log "no Python environment for the peer (scripts/python_env.sh failed above)"
  exit 1
fi
peer=bench/bench_encode_model_peer.py
mkdir -p "$bench_dir"

# Every thread pool of both sides on T threads (the peer's torch.set_num_threads(T) also gets --threads).
thread_env=(OMP_NUM_THREADS="$threads" OPENBLAS_NUM_THREADS="$threads" MKL_NUM_THREADS="$threads")
peer_env=("${thread_env[@]}" RAYON_NUM_THREADS="$threads" HF_HUB_OFFLINE=1 HF_HUB_DISABLE_PROGRESS_BARS=1
          TRANSFORMERS_VERBOSITY=error)

# --- the model, made once
model=$bench_dir/minilm-l6-v2-shape-seed0
if [[ ! -f $model.ok ]]; then
  log "making $model (random all-MiniLM-L6-v2 shape, bert-base-uncased vocabulary; once, then cached)"
  rm -rf "$model" "$model.tmp"
  env "${peer_env[@]}" "$python" tests/oracles/hf_model_ref.py make st "$model.tmp" --tokenizer "$tokdir" --layers 6 \
    --heads 12 --width 384 --intermediate 1536 --max-position 512 --max-seq-length 256 --pooling mean \
    --normalize --seed 0 >&2
  mv "$model.tmp" "$model"
  touch "$model.ok"
fi

# --- the texts
texts_file=$bench_dir/stsb-$n_texts.txt
if [[ ! -f $texts_file ]]; then
  got=$("$python" "$peer" texts "$stsb" "$n_texts" "$texts_file.tmp")
  mv "$texts_file.tmp" "$texts_file"
  [[ $got == "$n_texts" ]] || log "the STS benchmark holds $got sentences, not $n_texts: using $got"
fi
n_texts=$(wc -l <"$texts_file")
log "texts: $texts_file ($n_texts lines, $(wc -c <"$texts_file") bytes); batch $batch, $threads thread(s), $rounds round(s)"

now() { date +%s.%N; }
calc() { awk "BEGIN { printf \"$1\", ($2) }"; }  # FORMAT EXPRESSION (in parentheses: a bare ">" would redirect)
harness() { python3 bench/harness.py "$@"; }  # medians, ratios, JSON lines (bench/harness.py)
field() { harness field "$1" "$2"; }
median() { harness median "$@"; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
record() {  # KEY=VALUE ...: one JSON line in $jsonl (numbers stay numbers; peer= is the peer's JSON line)
  "$python" - "$@" >>"$jsonl" <<'PY'
import json, sys
strings = {"bench", "order", "loadavg", "commit", "cpu", "model", "texts_file", "time", "spread_threads_flag"}
d = {}
for kv in sys.argv[1:]:
    k, v = kv.split("=", 1)
    if k == "peer":
        d[k] = json.loads(v)
    elif k in strings:
        d[k] = v
    elif v in ("", "-"):
        d[k] = None
    else:
        d[k] = float(v) if any(c in v for c in ".en") else int(v)
print(json.dumps(d))
PY
}

run_peer() {  # sets peer_json, peer_process_s
  local t0 t1
  t0=$(now)
  if ! peer_json=$(env "${peer_env[@]}" "$python" "$peer" encode "$model" "$texts_file" "$rdir/peer.npy" \
                     --batch-size "$batch" --threads "$threads" 2>"$rdir/peer.log"); then
    tail -20 "$rdir/peer.log" >&2
    log "the peer failed (log: $rdir/peer.log)"
    exit 1
  fi
  t1=$(now)
  peer_process_s=$(calc %.4f "$t1 - $t0")
  log "  peer: load $(field "$peer_json" load_s) s, encode $(field "$peer_json" encode_s) s," \
      "process $peer_process_s s (load average $(loadavg))"
}

run_spread() {  # sets spread_wall_s, spread_inproc_s
  local t0 t1 rate
  rm -f "$rdir/spread.npy"
  t0=$(now)
  if ! env "${thread_env[@]}" "$spread" encode --model "$model" --in "$texts_file" --out "$rdir/spread.npy" \
         --batch-size "$batch" "${spread_flags[@]}" >"$rdir/spread.out" 2>"$rdir/spread.log"; then
    tail -20 "$rdir/spread.log" >&2
    log "spread encode failed (log: $rdir/spread.log)"
    exit 1
  fi
  t1=$(now)
  spread_wall_s=$(calc %.4f "$t1 - $t0")
  # Its last progress line: "encoding N/N texts | R texts/s | ETA 0s" (the rate since the texts were read).
  rate=$(grep -o '[0-9.]* texts/s' "$rdir/spread.log" | tail -1 | cut -d' ' -f1 || true)
  if [[ -n $rate && $(calc %d "$rate > 0") == 1 ]]; then spread_inproc_s=$(calc %.4f "$n_texts / $rate"); else spread_inproc_s=-; fi
  log "  spread: wall $spread_wall_s s, in-process encode $spread_inproc_s s (load average $(loadavg))"
}

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[[ -z $(git status --porcelain --untracked-files=no 2>/dev/null) ]] || commit+="-dirty"
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || echo unknown)

echo "## \`spread encode --model\` against \`SentenceTransformer.encode\`"
echo
echo "all-MiniLM-L6-v2 shape (6 layers, width 384, 12 heads, intermediate 1536, max_seq_length 256, mean + Normalize," \
     "random weights), $n_texts STS-B sentences, batch $batch, $threads thread(s), $rounds round(s);" \
     "$(nproc) CPU(s): $cpu; commit $commit; $(date -u +%Y-%m-%dT%H:%MZ)."
echo "Seconds. Peer: load = SentenceTransformer(DIR), encode = the encode call (after a warm-up batch)," \
     "load+encode = their sum. spread: wall = the whole \`spread encode\` command (start, load, encode, .npy);" \
     "in-process = N / its progress line's texts/s. Ratios = peer time / spread wall (> 1: spread faster)."
echo
echo "| round | order | peer load | peer encode | peer load+encode | spread wall | spread in-process | peer texts/s (encode) | spread texts/s (wall) | load+encode / spread wall | encode / spread wall | max abs diff |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
ratios_load=() ratios_encode=() peer_enc=() peer_le=() spread_walls=() failed_check=0
for round in $(seq "$rounds"); do
  rdir=$bench_dir/round$round
  mkdir -p "$rdir"
  spread_wall_s=- spread_inproc_s=- diff=- r_load=- r_encode=- r_process=- r_inproc=- spread_tps=-
  if [[ $peer_only == 1 ]]; then order=peer-only; log "round $round/$rounds (peer only)"; run_peer
  elif ((round % 2)); then order=peer-first; log "round $round/$rounds (peer first)"; run_peer; run_spread
  else order=spread-first; log "round $round/$rounds (spread first)"; run_spread; run_peer; fi
  peer_load=$(field "$peer_json" load_s) peer_encode=$(field "$peer_json" encode_s)
  peer_load_encode=$(field "$peer_json" load_encode_s)
  peer_tps=$(calc %.1f "$n_texts / $peer_encode")
  peer_enc+=("$peer_encode") peer_le+=("$peer_load_encode")
  if [[ $peer_only == 0 ]]; then
    cmp=$("$python" "$peer" compare "$rdir/peer.npy" "$rdir/spread.npy") || {
      log "the embedding matrices have different shapes: $cmp"; exit 1; }
    diff=$(field "$cmp" max_abs_diff)
    r_load=$(calc %.3f "$peer_load_encode / $spread_wall_s") r_encode=$(calc %.3f "$peer_encode / $spread_wall_s")
    r_process=$(calc %.3f "$peer_process_s / $spread_wall_s")
    [[ $spread_inproc_s == - ]] || r_inproc=$(calc %.3f "$peer_encode / $spread_inproc_s")
    spread_tps=$(calc %.1f "$n_texts / $spread_wall_s")
    ratios_load+=("$r_load") ratios_encode+=("$r_encode") spread_walls+=("$spread_wall_s")
    if [[ $(calc %d "$diff <= 1e-4") != 1 ]]; then failed_check=1; fi
    log "  max |peer - spread| = $(calc %.1e "$diff"); load+encode / spread wall ${r_load}x, encode / spread wall ${r_encode}x"
  fi
  record bench=encode_model round="$round" order="$order" texts="$n_texts" batch="$batch" threads="$threads" \
    model="$model" texts_file="$texts_file" commit="$commit" cpu="$cpu" time="$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    loadavg="$(loadavg)" spread_threads_flag="${spread_flags[*]}" peer="$peer_json" \
    peer_process_s="$peer_process_s" spread_wall_s="$spread_wall_s" spread_inprocess_s="$spread_inproc_s" \
    ratio_load_encode_over_spread_wall="$r_load" ratio_encode_over_spread_wall="$r_encode" \
    ratio_process_over_spread_wall="$r_process" ratio_encode_over_spread_inprocess="$r_inproc" \
    max_abs_diff="$diff"
  diff_shown=$diff; [[ $diff == - ]] || diff_shown=$(calc %.1e "$diff")
  r_load_shown=$r_load r_encode_shown=$r_encode
  [[ $r_load == - ]] || r_load_shown=$(calc %.2f "$r_load") r_encode_shown=$(calc %.2f "$r_encode")
  echo "| $round | $order | $peer_load | $peer_encode | $peer_load_encode | $spread_wall_s | $spread_inproc_s |" \
       "$peer_tps | $spread_tps | $r_load_shown | $r_encode_shown | $diff_shown |"
  if ((failed_check)); then
    log "the embeddings disagree: max |peer - spread| = $diff > 1e-4 (round $round: $rdir/peer.npy, $rdir/spread.npy)"
    exit 1
  fi
done
if [[ $peer_only == 0 ]]; then
  echo "| median | | | $(calc %.4f "$(median "${peer_enc[@]}")") | $(calc %.4f "$(median "${peer_le[@]}")") |" \
       "$(calc %.4f "$(median "${spread_walls[@]}")") | | | | **$(calc %.2f "$(median "${ratios_load[@]}")")** |" \
       "**$(calc %.2f "$(median "${ratios_encode[@]}")")** | |"
  echo
  echo "spread / SentenceTransformer, median of $rounds round(s):" \
       "$(calc %.2f "$(median "${ratios_load[@]}")")x against the peer's load+encode (headline)," \
       "$(calc %.2f "$(median "${ratios_encode[@]}")")x against its encode call alone (stricter); target >= 1.25x."
else
  echo "| median | | | $(calc %.4f "$(median "${peer_enc[@]}")") | $(calc %.4f "$(median "${peer_le[@]}")") | | | | | | | |"
  echo
  echo "(--peer-only: no spread runs, no ratios)"
fi
log "rounds recorded in $jsonl"
