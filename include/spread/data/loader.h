#pragma once
// Batches of random windows from a token file. The windows of (step, micro-step) depend only on the seed and
// those two numbers, so the data position of a run is its step count: resuming needs no sampler state.
#include <cstdint>
#include <torch/types.h>

#include <vector>

#include "spread/data/token_file.h"

namespace spread {

struct Batch {
  torch::Tensor x;  // [B, T] int64 inputs
  torch::Tensor y;  // [B, T] int64 next-token targets
};


// A token stream and its share of a mixture's windows (a relative weight, > 0).
struct WeightedTokens {
  const TokenFile* tokens;
  double weight = 1.0;
};

class WindowSampler {
 public:
  WindowSampler(const TokenFile& tokens, int64_t block_size, uint64_t seed);
  // A mixture: each window comes from source i with probability weight_i / (sum of the weights); the source and
  // the window are both drawn from the stateless stream, so (seed, step, micro) still fixes the batch. One source
  // draws exactly the windows of the constructor above.
  WindowSampler(std::vector<WeightedTokens> sources, int64_t block_size, uint64_t seed);
  Batch sample(int64_t batch_size, uint64_t step, uint64_t micro = 0) const;

 private:
  std::vector<WeightedTokens> sources_;
  std::vector<double> cumulative_;  // the sources' normalised weights, summed; the last is 1
  int64_t block_;
  uint64_t seed_;
};

// The whole split as consecutive windows (each window predicts block_size targets), for exact evaluation.
// Returns the number of windows; batch i holds windows [i*B, (i+1)*B).
int64_t count_windows(const TokenFile& tokens, int64_t block_size);
Batch sequential_batch(const TokenFile& tokens, int64_t block_size, int64_t first_window, int64_t n_windows);

}  // namespace spread
