#pragma once
// Ward pooling of a padded batch (docs/design.md §6.3 step 6): documents [B, n, d] with a mask of valid tokens, each
// pooled by ward_pool (ward.h) on its valid rows in order, documents spread over LibTorch's intra-op thread count, the
// results right-padded again with a new mask. Values only: the assignment is discrete and computed on a detached
// float64 copy; a loss that needs gradients rebuilds the pooled vectors from `labels`.
#include <torch/types.h>

#include "spread/pooling/ward.h"

namespace spread {

struct WardBatch {
  torch::Tensor vectors;  // [B, K, d] in the dtype and on the device of the tokens; K = the longest output; padding 0
  torch::Tensor mask;     // [B, K] bool, true = an output vector
  torch::Tensor labels;   // [B, n] int64: output row - P' of each valid, unprotected token; -1 for protected tokens
                          // and padding (output row = P' + label, P' = the document's protected count)
};

// tokens: [B, n, d] floating; mask: [B, n] (bool or 0/1), or undefined for no padding. Throws std::invalid_argument
// for other shapes, a bad budget or non-finite valid tokens.
WardBatch ward_pool_batch(const torch::Tensor& tokens, const torch::Tensor& mask, const WardBudget& budget,
                          const WardPoolOptions& opt = {});

}  // namespace spread
