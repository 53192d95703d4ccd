#!/usr/bin/env bash
# Writes tests/data/lm_reference/: the losses of two tiny LM runs made by a given `spread` binary, so that a
# refactor of the training loop can be checked against the numbers of the code before it
# (tests/test_train.cpp, Train.LmTaskReproducesTheReferenceLosses). The corpus is test_train.cpp's corpus_text().
#   tests/oracles/gen_lm_reference.sh PATH/TO/spread   (the fixture in git was made by commit 5e614b0's build)
set -euo pipefail
spread=$(realpath "$1")
cd "$(dirname "$0")/../.."
out=tests/data/lm_reference
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/env python3 - "$work/corpus.txt" <<'PY'
import sys
M = (1 << 64) - 1
def splitmix64(x):
    x = (x + 0x9e3779b97f4a7c15) & M
    x = ((x ^ (x >> 30)) * 0xbf58476d1ce4e5b9) & M
    x = ((x ^ (x >> 27)) * 0x94d049bb133111eb) & M
    return x ^ (x >> 31)
words = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "and", "cat"]
s, text = 7, []
for _ in range(3000):
    s = splitmix64(s)
    text.append(words[s % 10])
    text.append(".\n" if (s >> 20) % 9 == 0 else " ")
open(sys.argv[1], "w").write("".join(text))
PY
common=(--set run.out_dir="$work" --set data.source=text --set data.path="$work/corpus.txt" --set tokenizer.kind=char
        --set model.n_layer=2 --set model.n_head=2 --set model.n_embd=16 --set model.block_size=16
        --set train.batch_size=4 --set train.max_steps=20 --set train.warmup_steps=2 --set train.log_every=1
        --set train.eval_every=5 --set train.eval_batches=2 --set train.ckpt_every=5 --set train.keep_last=10
        --set model.dropout=0.1)
printf '[run]\nname = "x"\n' > "$work/recipe.toml"
"$spread" train "$work/recipe.toml" "${common[@]}" --set run.name=plain > /dev/null
"$spread" train "$work/recipe.toml" "${common[@]}" --set run.name=accum --set train.grad_accum=2 > /dev/null
mkdir -p "$out"
# Loss lines and eval lines, without timings.
for run in plain accum; do
  /usr/bin/env python3 -c '
import json, sys
keep = ("step", "loss", "loss_lm", "loss_disp", "grad_norm", "val_loss")
for line in open(sys.argv[1]):
    j = json.loads(line)
    if "event" not in j and ("loss" in j or "val_loss" in j):
        print(json.dumps({k: j[k] for k in keep if k in j}))
' "$work/$run/metrics.jsonl" > "$out/$run.jsonl"
done
echo "wrote $out/{plain,accum}.jsonl"
