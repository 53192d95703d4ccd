#pragma once
// Autoregressive sampling: temperature, top-k, seeded (the same seed gives the same text).
#include <cstdint>
#include <vector>

#include "spread/model/transformer.h"

namespace spread {

struct SampleOptions {
  int64_t max_new_tokens = 200;
  double temperature = 0.8;  // 0 = greedy
  int64_t top_k = 200;       // 0 = whole vocabulary
  uint64_t seed = 1337;
};

std::vector<int32_t> generate(Transformer& model, std::vector<int32_t> prompt, const SampleOptions& options,
                              const torch::Device& device);

}  // namespace spread
