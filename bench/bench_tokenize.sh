#!/usr/bin/env bash
# Tokenizer speed: single-threaded encode throughput (tokens/s) of spread's Hugging Face tokenizer
# (build/bench_tokenize, encode_batch timed in-process) against the reference library's encode_batch
# (Hugging Face `tokenizers`, TOKENIZERS_PARALLELISM=false, timed in Python around the call only), on the same
# lines, for the BERT (tokenizer.json) and GPT-2 (vocab.json + merges.txt, on the reference's side as
# transformers loads it: tests/oracles/hf_tokenize_ref.py's load) tokenizers. Rounds alternate (spread first in odd rounds, the
# reference first in even ones), so the machine's drift lands on both; the ratio is the median of the per-round
# ratios (target >= 1.0x). Then spread's encode_batch on 2 threads against 1 thread, alternating the same way
# (target >= 1.6x on 2 cores), and spread's resident memory with the GPT-2 tokenizer loaded (target < 50 MB).
#   bench/bench_tokenize.sh [LINES_FILE]    (default: tinyshakespeare and the scifact corpus, 50k lines)
# ROUNDS (default 3), DATA (../shared/data), BUILD (build), RESULTS (a JSONL file: one line per timed run).
# Progress goes to stderr; on a shared machine the load average printed with each round says how busy it was.
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
build="${BUILD:-build}"
data="${DATA:-../shared/data}"
rounds="${ROUNDS:-3}"
work=$(mktemp -d /tmp/bench_tokenize.XXXXXX)
trap 'rm -rf "$work"' EXIT
results="${RESULTS:-$work/results.jsonl}"
if [[ ! -x "$build/bench_tokenize" ]]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" -j"$(nproc)" --target bench_tokenize
fi
python="$(scripts/python_env.sh)"
"$python" tests/oracles/tokenizer_corpora.py "$work/prep" --data "$data" >&2
lines="${1:-$work/lines.txt}"
[[ -n "${1:-}" ]] || cat "$work/prep/corpora/tinyshakespeare.txt" "$work/prep/corpora/scifact-corpus.txt" > "$lines"
echo "lines: $lines ($(wc -l < "$lines") lines, $(wc -c < "$lines") bytes)" >&2

ref() {  # reference encode_batch on one thread: a JSON line as bench_tokenize's
  TOKENIZERS_PARALLELISM=false "$python" - "$1" "$lines" <<'PY'
import json, sys, time
sys.path.insert(0, "tests/oracles")
from hf_tokenize_ref import load
tok = load(sys.argv[1])
lines = open(sys.argv[2], encoding="utf-8", newline="").read().split("\n")
if lines and lines[-1] == "":
    lines.pop()
t0 = time.perf_counter()
enc = tok.encode_batch(lines, add_special_tokens=True)
s = time.perf_counter() - t0
tokens = sum(sum(e.attention_mask) for e in enc)
print(json.dumps({"lines": len(lines), "tokens": tokens, "seconds": round(s, 4), "tokens_per_s": round(tokens / s)}))
PY
}
ours() { "$build/bench_tokenize" --tokenizer "$1" --in "$lines" --threads "${2:-1}" | head -1; }
harness() { python3 bench/harness.py "$@"; }  # medians, ratios, JSON lines
field() { harness field "$1" "$2"; }
record() { harness record --results "$results" "$1" "$2"; }
median() { harness median --digits 3 "$@"; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

bert="$data/tokenizers/bert-base-uncased/tokenizer.json"
declare -A ours_of=([bert]="$bert" [gpt2]="$data/tokenizers/gpt2/vocab.json")
declare -A ref_of=([bert]="$bert" [gpt2]="$data/tokenizers/gpt2/vocab.json")

printf '%-6s %-6s %14s %14s %8s   %s\n' tokenizer round "spread tok/s" "reference tok/s" ratio "load average"
for name in bert gpt2; do
  ratios=()
  for round in $(seq "$rounds"); do
    echo "-- $name round $round" >&2
    if (( round % 2 )); then a=$(ours "${ours_of[$name]}"); b=$(ref "${ref_of[$name]}");
    else b=$(ref "${ref_of[$name]}"); a=$(ours "${ours_of[$name]}"); fi
    [[ $(field "$a" tokens) == $(field "$b" tokens) ]] || echo "warning: $name: spread counted $(field "$a" tokens) tokens, the reference $(field "$b" tokens)" >&2
    r=$(harness ratio --digits 3 "$(field "$a" tokens_per_s)" "$(field "$b" tokens_per_s)")
    ratios+=("$r")
    record "{\"bench\": \"encode_1_thread\", \"tokenizer\": \"$name\", \"round\": $round, \"side\": \"spread\"}" "$a"
    record "{\"bench\": \"encode_1_thread\", \"tokenizer\": \"$name\", \"round\": $round, \"side\": \"reference\"}" "$b"
    printf '%-9s %-6s %14s %14s %8s   %s\n' "$name" "$round" "$(field "$a" tokens_per_s)" "$(field "$b" tokens_per_s)" "${r}x" "$(load)"
  done
  echo "== $name: spread / reference single-threaded encode, median of $rounds rounds: $(median "${ratios[@]}")x (target >= 1.0)"
done

printf '%-6s %-6s %14s %14s %8s\n' tokenizer round "1 thread" "2 threads" ratio
for name in bert gpt2; do
  ratios=()
  for round in $(seq "$rounds"); do
    if (( round % 2 )); then a=$(ours "${ours_of[$name]}" 1); b=$(ours "${ours_of[$name]}" 2);
    else b=$(ours "${ours_of[$name]}" 2); a=$(ours "${ours_of[$name]}" 1); fi
    r=$(harness ratio --digits 3 "$(field "$b" tokens_per_s)" "$(field "$a" tokens_per_s)")
    ratios+=("$r")
    record "{\"bench\": \"encode_threads\", \"tokenizer\": \"$name\", \"round\": $round}" "$b"
    printf '%-9s %-6s %14s %14s %8s   %s\n' "$name" "$round" "$(field "$a" tokens_per_s)" "$(field "$b" tokens_per_s)" "${r}x" "$(load)"
  done
  echo "== $name: spread encode_batch 2 threads / 1 thread, median of $rounds rounds: $(median "${ratios[@]}")x (target >= 1.6)"
done

mem=$("$build/bench_tokenize" --tokenizer "${ours_of[gpt2]}" --in "$lines" --rounds 0 | tail -1)
record '{"bench": "rss_gpt2"}' "$mem"
echo "== RSS with the GPT-2 tokenizer loaded: $(field "$mem" rss_loaded_mib) MiB ($(field "$mem" rss_start_mib) MiB before loading it; target < 50 MB)"
[[ -n "${RESULTS:-}" ]] && echo "results: $results" >&2
exit 0
