#include "spread/data/loader.h"

#include <stdexcept>

#include "spread/util/random.h"

namespace spread {

WindowSampler::WindowSampler(const TokenFile& tokens, int64_t block_size, uint64_t seed)
    : tokens_(tokens), block_(block_size), seed_(seed) {
  if (tokens_.size() < uint64_t(block_size) + 2)
    throw std::invalid_argument("token split shorter than one block");
}

Batch WindowSampler::sample(int64_t batch_size, uint64_t step, uint64_t micro) const {
  auto x = torch::empty({batch_size, block_}, torch::kLong);
  auto y = torch::empty({batch_size, block_}, torch::kLong);
  const uint64_t starts = tokens_.size() - uint64_t(block_);  // last start leaves room for the shifted target
  uint64_t state = splitmix64(seed_ ^ splitmix64(step * 0x100000001b3ULL + micro));
  for (int64_t b = 0; b < batch_size; ++b) {
    state = splitmix64(state);
    uint64_t start = state % starts;
    tokens_.copy(start, block_, x[b].data_ptr<int64_t>());
    tokens_.copy(start + 1, block_, y[b].data_ptr<int64_t>());
  }
  return {x, y};
}

int64_t count_windows(const TokenFile& tokens, int64_t block_size) {
  return int64_t((tokens.size() - 1) / uint64_t(block_size));
}

Batch sequential_batch(const TokenFile& tokens, int64_t block_size, int64_t first_window, int64_t n_windows) {
  auto x = torch::empty({n_windows, block_size}, torch::kLong);
  auto y = torch::empty({n_windows, block_size}, torch::kLong);
  for (int64_t i = 0; i < n_windows; ++i) {
    uint64_t start = uint64_t(first_window + i) * uint64_t(block_size);
    tokens.copy(start, block_size, x[i].data_ptr<int64_t>());
    tokens.copy(start + 1, block_size, y[i].data_ptr<int64_t>());
  }
  return {x, y};
}

}  // namespace spread
