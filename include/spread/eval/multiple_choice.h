#pragma once
// Zero-shot multiple-choice scores of a causal LM (HellaSwag, ARC, PIQA and the like), as lm-evaluation-harness
// computes them: every ending is scored by its log-likelihood after the context, and the item counts as right when
// the labelled ending scores highest by
//   acc:      the summed log-likelihood of the ending's tokens
//   acc_norm: that sum over the ending's length in characters (the harness's length normalisation)
// Tokens as the harness makes them: trailing spaces of the context move to the front of the ending; the ending's
// tokens are those of encode(context + ending) past the length of encode(context), and the model reads
// encode(context) followed by them; no special tokens; the last block_size + 1 tokens when longer (the context cut
// from the left). Ties go to the first ending, as numpy's argmax gives them.
//
// The file (JSONL, one item a line): {"context": "...", "endings": ["...", ...], "label": INDEX}; other keys are
// ignored. docs/models.md says how to write HellaSwag, ARC and PIQA in it.
#include <cstdint>
#include <string>
#include <vector>

#include <torch/types.h>

#include "spread/data/tokenizer.h"
#include "spread/model/transformer.h"

namespace spread {

struct ChoiceItem {
  std::string context;
  std::vector<std::string> endings;
  int64_t label = 0;
};

// The items of a choices file. UserError naming the file and line (and the key) for unreadable, non-UTF-8 or
// malformed lines: not an object, a missing or empty context, fewer than two endings, an empty ending, a label out
// of range; and for a file without items or larger than 1 GiB.
std::vector<ChoiceItem> read_choices(const std::string& path);

struct ChoiceResult {
  int64_t items = 0;
  double acc = 0, acc_norm = 0;
  std::vector<std::vector<double>> loglik;   // [item][ending]
  std::vector<std::vector<int64_t>> tokens;  // the ending's token count, [item][ending]
};

// Scores every ending of every item with `model` (a causal LM), `batch_size` sequences per forward pass, under
// no_grad in eval mode (restored afterwards). Progress lines go to stderr.
ChoiceResult evaluate_choices(Transformer& model, const Tokenizer& tokenizer, const std::vector<ChoiceItem>& items,
                              int64_t batch_size, const torch::Device& device);

}  // namespace spread
