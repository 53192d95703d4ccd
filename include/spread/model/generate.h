#pragma once
// Autoregressive sampling: temperature, top-k, seeded (the same seed gives the same text).
#include <cstdint>
#include <functional>
#include <vector>

#include "spread/model/transformer.h"

namespace spread {

struct SampleOptions {
  int64_t max_new_tokens = 200;
  double temperature = 0.8;  // 0 = greedy
  int64_t top_k = 200;       // 0 = whole vocabulary
  uint64_t seed = 1337;
  int64_t vocab_limit = 0;   // > 0: only ids below it are drawn (an embedding table padded past the tokenizer)
};

// Each new token costs a forward pass over up to block_size tokens; at this many a generation runs for hours on
// a CPU, so a larger request is a typo more likely than a wish.
inline constexpr int64_t kMaxNewTokens = 100000;

// The prompt followed by the sampled ids. `on_token`, when given, sees each id as soon as it is drawn.
std::vector<int32_t> generate(Transformer& model, std::vector<int32_t> prompt, const SampleOptions& options,
                              const torch::Device& device, const std::function<void(int32_t)>& on_token = {});

}  // namespace spread
