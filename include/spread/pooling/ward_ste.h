#pragma once
// Pooled document vectors with a gradient, for pooling-aware training (docs/design.md §6.5). The Ward assignment is
// discrete and computed on a detached copy (ward_pool_batch); this rebuilds the pooled rows from the live token vectors
// so that gradients reach the member tokens:
//   protected row r  = the r-th valid token itself (its gradient passes unchanged)
//   cluster row c    = normalize(s_c / |c|),  s_c = sum of the member tokens y_i, i in c
// ste = mean:     differentiate that expression (each member gets its share through the mean and normalisation);
// ste = identity: forward value unchanged, each member receives the pooled row's full gradient:
//                 p_c = p_c.detach() + (s_c - s_c.detach()).
// The forward values equal ward_pool_batch's vectors up to float rounding (they are computed in the tokens' dtype).
#include <string>
#include <torch/types.h>

#include "spread/pooling/ward_batch.h"

namespace spread {

enum class WardSte { kMean, kIdentity };

// "mean" | "identity"; throws std::invalid_argument naming the valid values otherwise.
WardSte parse_ward_ste(const std::string& name);

// tokens [B, n, d] (unit rows, usually requiring grad) and the mask given to ward_pool_batch (undefined = all
// valid); `pooled` is ward_pool_batch's result for them. Returns [B, K, d] with pooled.mask's layout (padding 0).
torch::Tensor pooled_with_gradient(const torch::Tensor& tokens, const torch::Tensor& mask, const WardBatch& pooled,
                                   WardSte ste);

}  // namespace spread
