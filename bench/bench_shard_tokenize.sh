#!/usr/bin/env bash
# Writing token shards: `spread tokenize --shards` (data/shard_writer.h) against the reference library's
# encode_batch (Hugging Face `tokenizers`, RAYON_NUM_THREADS=THREADS, TOKENIZERS_PARALLELISM=true, timed in Python
# around the calls only, over batches of 50,000 lines, without truncation or padding and without special tokens:
# the ids the shards hold), on the same text and the same number of threads, for the GPT-2 (vocab.json +
# merges.txt, on the reference's side as transformers loads it: tests/oracles/hf_tokenize_ref.py's load) and BERT
# (tokenizer.json) tokenizers.
#   speed   MB of text per second. spread's whole command (process start, tokenizer load, reading, writing the
#           shards) by wall clock, and its own seconds from OUT_DIR/tokenize.jsonl; the reference's encode_batch
#           calls alone. Rounds alternate (spread first in odd rounds, the reference first in even ones); the ratio
#           is the median of the per-round ratios (target >= 1.25x).
#   memory  spread's peak RSS (/usr/bin/time's maximum resident set) writing GPT-2 shards from SIZE_MB and from
#           BIG_MB of text: flat in the input size when the stream is bounded.
# The text: tinyshakespeare and the SciFact corpus (tests/oracles/tokenizer_corpora.py), repeated to the size asked.
#   bench/bench_shard_tokenize.sh
# ROUNDS (default 3), THREADS (nproc), SIZE_MB (50), BIG_MB (400), DATA (../shared/data), BUILD (build).
# Progress goes to stderr; on a shared machine the load average printed with each round says how busy it was.
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
build="${BUILD:-build}"
data="${DATA:-../shared/data}"
rounds="${ROUNDS:-3}"
threads="${THREADS:-$(nproc)}"
size_mb="${SIZE_MB:-50}"
big_mb="${BIG_MB:-400}"
work=$(mktemp -d /tmp/bench_shard_tokenize.XXXXXX)
trap 'rm -rf "$work"' EXIT
if [[ ! -x "$build/spread" ]]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" -j"$(nproc)" --target spread
fi
python="$(scripts/python_env.sh)"
"$python" tests/oracles/tokenizer_corpora.py "$work/prep" --data "$data" >&2
cat "$work/prep/corpora/tinyshakespeare.txt" "$work/prep/corpora/scifact-corpus.txt" > "$work/corpus.txt"

repeat_to() {  # FILE MB: the corpus repeated until FILE holds at least MB megabytes
  : > "$1"
  while (( $(stat -c %s "$1") < $2 * 1000000 )); do cat "$work/corpus.txt" >> "$1"; done
}
repeat_to "$work/text.txt" "$size_mb"
bytes=$(stat -c %s "$work/text.txt")
echo "text: $bytes bytes, $(wc -l < "$work/text.txt") lines; $threads threads; CPU: $(lscpu | sed -n 's/^Model name: *//p')" >&2

ours() {  # TOKENIZER TEXT: a JSON line {wall_s, in_process_s, tokens, rss_kib}
  rm -rf "$work/out"
  local t0 t1
  t0=$(date +%s.%N)
  /usr/bin/time -f '%M' -o "$work/rss" \
    "$build/spread" tokenize --tokenizer "$1" --shards "$work/out" --in "$2" --threads "$threads" 2> "$work/ours.log"
  t1=$(date +%s.%N)
  python3 - "$t0" "$t1" "$work/out/tokenize.jsonl" "$work/rss" <<'PY'
import json, sys
done = [json.loads(l) for l in open(sys.argv[3])][-1]
print(json.dumps({"wall_s": round(float(sys.argv[2]) - float(sys.argv[1]), 3), "in_process_s": round(done["seconds"], 3),
                  "tokens": done["tokens"], "documents": done["documents"], "rss_kib": int(open(sys.argv[4]).read().split()[-1])}))
PY
}

ref() {  # TOKENIZER: a JSON line {seconds, tokens, documents}, tokens counting one end of text per document
  RAYON_NUM_THREADS="$threads" TOKENIZERS_PARALLELISM=true "$python" - "$1" "$work/text.txt" <<'PY'
import json, sys, time
sys.path.insert(0, "tests/oracles")
from hf_tokenize_ref import load
tok = load(sys.argv[1])
tok.no_truncation()
tok.no_padding()
lines = [l for l in open(sys.argv[2], encoding="utf-8", newline="").read().split("\n") if l]
seconds, tokens = 0.0, 0
for i in range(0, len(lines), 50000):
    batch = lines[i:i + 50000]
    t0 = time.perf_counter()
    enc = tok.encode_batch(batch, add_special_tokens=False)
    seconds += time.perf_counter() - t0
    tokens += sum(len(e.ids) for e in enc)
print(json.dumps({"seconds": round(seconds, 3), "tokens": tokens + len(lines), "documents": len(lines)}))
PY
}

harness() { python3 bench/harness.py "$@"; }  # medians, ratios, JSON lines
field() { harness field "$1" "$2"; }
mbps() { awk -v b="$bytes" -v s="$1" 'BEGIN { printf "%.2f\n", b / 1e6 / s }'; }
ratio() { harness ratio --digits 3 "$1" "$2"; }
median() { harness median --digits 3 "$@"; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

declare -A tokenizer_of=([gpt2]="$data/tokenizers/gpt2/vocab.json"
                         [bert]="$data/tokenizers/bert-base-uncased/tokenizer.json")
printf '%-9s %-6s %12s %14s %12s %8s %11s   %s\n' tokenizer round "spread MB/s" "in-process" "ref MB/s" ratio \
  "in-process" "load average"
for name in gpt2 bert; do
  ratios=() inner=()
  for round in $(seq "$rounds"); do
    echo "-- $name round $round" >&2
    if (( round % 2 )); then a=$(ours "${tokenizer_of[$name]}" "$work/text.txt"); b=$(ref "${tokenizer_of[$name]}");
    else b=$(ref "${tokenizer_of[$name]}"); a=$(ours "${tokenizer_of[$name]}" "$work/text.txt"); fi
    [[ $(field "$a" tokens) == $(field "$b" tokens) ]] ||
      echo "warning: $name: spread wrote $(field "$a" tokens) tokens, the reference's ids and ends of text are $(field "$b" tokens)" >&2
    r=$(ratio "$(field "$b" seconds)" "$(field "$a" wall_s)")
    q=$(ratio "$(field "$b" seconds)" "$(field "$a" in_process_s)")
    ratios+=("$r") inner+=("$q")
    printf '%-9s %-6s %12s %14s %12s %8s %11s   %s\n' "$name" "$round" "$(mbps "$(field "$a" wall_s)")" \
      "$(mbps "$(field "$a" in_process_s)")" "$(mbps "$(field "$b" seconds)")" "${r}x" "${q}x" "$(load)"
  done
  echo "== $name: spread tokenize --shards (whole command) / encode_batch, median of $rounds rounds: $(median "${ratios[@]}")x" \
       "(in-process: $(median "${inner[@]}")x; target >= 1.25)"
done

repeat_to "$work/big.txt" "$big_mb"
for text in "$work/text.txt" "$work/big.txt"; do
  m=$(ours "${tokenizer_of[gpt2]}" "$text")
  echo "== peak RSS writing GPT-2 shards from $(( $(stat -c %s "$text") / 1000000 )) MB: $(( $(field "$m" rss_kib) / 1024 )) MiB" \
       "($(field "$m" tokens) tokens, $(field "$m" wall_s) s; load $(load))"
done
