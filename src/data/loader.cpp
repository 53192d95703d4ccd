#include "spread/data/loader.h"

#include <algorithm>
#include <stdexcept>

#include "spread/util/random.h"

namespace spread {

WindowSampler::WindowSampler(const TokenFile& tokens, int64_t block_size, uint64_t seed)
    : WindowSampler(std::vector<WeightedTokens>{{&tokens, 1.0}}, block_size, seed) {}

WindowSampler::WindowSampler(std::vector<WeightedTokens> sources, int64_t block_size, uint64_t seed)
    : sources_(std::move(sources)), block_(block_size), seed_(seed) {
  if (sources_.empty()) throw std::invalid_argument("a window sampler needs a token source");
  double total = 0;
  for (const auto& s : sources_) {
    if (!(s.weight > 0)) throw std::invalid_argument("a mixture weight must be positive");
    if (s.tokens->size() < uint64_t(block_size) + 2) throw std::invalid_argument("token split shorter than one block");
    total += s.weight;
  }
  double sum = 0;
  for (const auto& s : sources_) cumulative_.push_back((sum += s.weight) / total);
  cumulative_.back() = 1.0;  // no rounding gap above the last source
}

Batch WindowSampler::sample(int64_t batch_size, uint64_t step, uint64_t micro) const {
  auto x = torch::empty({batch_size, block_}, torch::kLong);
  auto y = torch::empty({batch_size, block_}, torch::kLong);
  uint64_t state = splitmix64(seed_ ^ splitmix64(step * 0x100000001b3ULL + micro));
  for (int64_t b = 0; b < batch_size; ++b) {
    size_t source = 0;
    if (sources_.size() > 1) {  // one source draws no number for it: its windows stay those of a plain stream
      state = splitmix64(state);
      const double u = double(state >> 11) * 0x1.0p-53;  // uniform in [0, 1)
      source = size_t(std::upper_bound(cumulative_.begin(), cumulative_.end(), u) - cumulative_.begin());
    }
    const TokenFile& tokens = *sources_[source].tokens;
    state = splitmix64(state);
    const uint64_t start = state % (tokens.size() - uint64_t(block_));  // room for the shifted target
    tokens.copy(start, block_, x[b].data_ptr<int64_t>());
    tokens.copy(start + 1, block_, y[b].data_ptr<int64_t>());
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
