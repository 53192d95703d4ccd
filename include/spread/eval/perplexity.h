#pragma once
// Language-model evaluation (docs/design.md §8.1): mean cross-entropy per token on held-out text,
// perplexity = exp(loss), and bits per byte = loss / ln 2 * tokens / bytes, comparable across tokenizers.
#include <string>
#include <vector>

#include "spread/data/loader.h"
#include "spread/model/transformer.h"

namespace spread {

struct EvalResult {
  double loss = 0;
  double ppl = 0;
  double bpb = 0;
  int64_t tokens = 0;
};

// "12.345", or "1.234e+115" once the fixed form would be longer than the number means (a diverged model).
std::string format_perplexity(double ppl);

// Runs in eval mode under no_grad and restores the model's training mode afterwards.
EvalResult evaluate_batches(Transformer& model, const std::vector<Batch>& batches, double bytes_per_token,
                            const torch::Device& device);

// The whole split as consecutive windows (max_batches = 0: all of them).
EvalResult evaluate_split(Transformer& model, const TokenFile& tokens, int64_t batch_size, int64_t max_batches,
                          const torch::Device& device);

}  // namespace spread
