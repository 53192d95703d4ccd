#!/usr/bin/env bash
# The whole tokenizer comparison: every line of every text corpus in ../shared/data (tinyshakespeare,
# scifact corpus and queries, stsb, sick, Debian's WordNet text when installed) and tests/data/tokenizer_text/
# adversarial.txt, for each tokenizer (BERT tokenizer.json, BERT vocab.txt, GPT-2 vocab.json + merges.txt, every
# fixture of tests/oracles/gen_tokenizer_fixtures.py), through `spread tokenize` and the reference library
# (tests/oracles/hf_tokenize_ref.py: Hugging Face `tokenizers`; the legacy layouts as transformers loads them). Per tokenizer: lines, id mismatches (spread's ids of a
# line against the reference's, post-processor included) and decode mismatches (spread's decode of the reference's
# ids against the reference's decode, special tokens skipped); lines that are not valid UTF-8 must be refused by
# spread (exit 2), counted apart. The first mismatches of each tokenizer are printed.
#   tests/oracles/check_tokenizers.sh [WORK_DIR]     (DATA=dir for another data folder, BUILD=dir for another build,
#                                               ONLY=regex for the tokenizers whose names match)
# Lines whose decode panics in the reference itself (tokenizers 0.22.2's Strip decoder on an empty string) are
# counted on stderr and their decode is not compared; their ids still are.
# Exit 0 when every count is 0 and only the Unigram fixtures are refused (spread implements WordPiece and BPE). Builds spread in ./build when it is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${BUILD:-build}"
data="${DATA:-../shared/data}"
work="${1:-$(mktemp -d /tmp/check_tokenizers.XXXXXX)}"
mkdir -p "$work"
if [[ ! -x "$build/spread" ]]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" -j"$(nproc)" --target spread
fi
python="$(scripts/python_env.sh)"
spread="$build/spread"

echo "== preparing corpora and fixtures in $work" >&2
"$python" tests/oracles/tokenizer_corpora.py "$work" --data "$data" >&2
"$python" tests/oracles/gen_tokenizer_fixtures.py "$work/fixtures" --data "$data" >&2

# name, what spread reads, what the reference reads
tokenizers=(
  "bert-tokenizer.json|$data/tokenizers/bert-base-uncased/tokenizer.json|$data/tokenizers/bert-base-uncased/tokenizer.json"
  "bert-vocab.txt|$data/tokenizers/bert-base-uncased/vocab.txt|$data/tokenizers/bert-base-uncased/vocab.txt"
  "gpt2-vocab.json|$data/tokenizers/gpt2/vocab.json|$data/tokenizers/gpt2/vocab.json"
)
for f in "$work"/fixtures/*.json "$work"/fixtures/unigram/*.json; do
  tokenizers+=("fixture:$(basename "$f" .json)|$f|$f")
done

mkdir -p "$work/out"
status=0
printf '%-34s %9s %14s %18s %14s\n' tokenizer lines "id mismatches" "decode mismatches" "invalid refused"
for entry in "${tokenizers[@]}"; do
  IFS='|' read -r name ours theirs <<< "$entry"
  [[ -n "${ONLY:-}" && ! "$name" =~ $ONLY ]] && continue
  tag="${name//[:\/]/_}"
  total=0; ids_bad=0; decode_bad=0; invalid=0; refused=0
  # A tokenizer spread cannot load (e.g. a Unigram model: spread implements WordPiece and BPE) is one row saying so.
  echo "probe" > "$work/out/probe.txt"
  if ! msg=$("$spread" tokenize --tokenizer "$ours" --in "$work/out/probe.txt" 2>&1 >/dev/null); then
    # The Unigram fixtures are there to show the refusal (spread implements WordPiece and BPE only); any other is a fault.
    if [[ "$ours" == */unigram/* ]]; then
      printf '%-34s refused, as expected (not implemented): %s\n' "$name" "${msg#error: }"
    else
      printf '%-34s refused by spread: %s\n' "$name" "${msg#error: }"
      status=1
    fi
    continue
  fi
  for corpus in "$work"/corpora/*.txt; do
    c="$(basename "$corpus" .txt)"
    [[ "$c" == *.invalid ]] && continue
    echo "-- $name on $c" >&2
    o="$work/out/$tag.$c"
    "$spread" tokenize --tokenizer "$ours" --in "$corpus" --out "$o.spread.jsonl" 2>> "$work/out/$tag.log"
    "$python" tests/oracles/hf_tokenize_ref.py "$theirs" "$corpus" "$o.ref.jsonl" 2>> "$work/out/$tag.log"
    "$python" -c 'import json, sys
with open(sys.argv[2], "w") as out:
    for l in open(sys.argv[1], encoding="utf-8"):
        out.write(json.dumps(json.loads(l)["ids"]) + "\n")' "$o.ref.jsonl" "$o.ref_ids.jsonl"
    "$spread" tokenize --tokenizer "$ours" --decode --no-special --in "$o.ref_ids.jsonl" --out "$o.decoded.jsonl" \
      2>> "$work/out/$tag.log"
    read -r n a b < <("$python" - "$corpus" "$o.spread.jsonl" "$o.ref.jsonl" "$o.decoded.jsonl" "$name" <<'PY'
import json, sys
corpus, ours, ref, decoded, name = sys.argv[1:]
texts = open(corpus, encoding="utf-8", newline="").read().split("\n")[:-1]
ours = [json.loads(l) for l in open(ours, encoding="utf-8")]
ref = [json.loads(l) for l in open(ref, encoding="utf-8")]
dec = [json.loads(l) for l in open(decoded, encoding="utf-8")]
if not (len(texts) == len(ours) == len(ref) == len(dec)):
    print(f"{name} {corpus}: line counts differ: text {len(texts)}, spread {len(ours)}, reference {len(ref)}, "
          f"decoded {len(dec)}", file=sys.stderr)
ids_bad = decode_bad = shown = panicked = 0
for i, (t, o, r, d) in enumerate(zip(texts, ours, ref, dec)):
    if o != r["ids"]:
        ids_bad += 1
        if shown < 3:
            shown += 1
            print(f"   {name} {corpus}:{i + 1}: {t[:80]!r}\n     spread {o[:24]}\n     ref    {r['ids'][:24]}",
                  file=sys.stderr)
    if isinstance(r["decoded"], dict):  # the reference's own decode panicked (hf_tokenize_ref.py): nothing to compare
        panicked += 1
    elif d != r["decoded"]:
        decode_bad += 1
        if shown < 3:
            shown += 1
            print(f"   {name} {corpus}:{i + 1}: decode {d[:80]!r} != ref {r['decoded'][:80]!r}", file=sys.stderr)
if panicked:
    print(f"   {name} {corpus}: {panicked} line(s) whose decode panics in the reference itself, not compared",
          file=sys.stderr)
print(max(len(texts), len(ours), len(ref)), ids_bad + abs(len(texts) - len(ours)), decode_bad + abs(len(ref) - len(dec)))
PY
)
    total=$((total + n)); ids_bad=$((ids_bad + a)); decode_bad=$((decode_bad + b))
  done
  # Each invalid UTF-8 line alone must be refused with exit code 2 and a message naming the file and line.
  for bad in "$work"/corpora/*.invalid.txt; do
    [[ -e "$bad" ]] || continue
    while IFS= read -r line || [[ -n "$line" ]]; do
      printf '%s\n' "$line" > "$work/out/one_invalid.txt"
      invalid=$((invalid + 1))
      set +e
      msg=$("$spread" tokenize --tokenizer "$ours" --in "$work/out/one_invalid.txt" --out "$work/out/x.jsonl" 2>&1)
      code=$?
      set -e
      [[ $code -eq 2 && "$msg" == *"one_invalid.txt:1"* ]] && refused=$((refused + 1))
    done < "$bad"
  done
  printf '%-34s %9d %14d %18d %14s\n' "$name" "$total" "$ids_bad" "$decode_bad" "$refused/$invalid"
  [[ $ids_bad -eq 0 && $decode_bad -eq 0 && $refused -eq $invalid ]] || status=1
done
exit $status
