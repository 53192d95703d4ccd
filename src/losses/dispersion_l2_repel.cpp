// Dispersion loss, l2_repel variant (docs/design.md §3.3; the reference code's "l2_repel").
//   L_seq = log mean_{i, j} exp(-||z_i - z_j||^2 / tau) + 0.1 * mean_{i valid, f} z_if^2   (all n^2 valid pairs)
//   L = mean over sequences with n >= 2 of L_seq
// On the raw states. The norm penalty (the reference's, with its 0.1) stops the loss from being lowered by simply
// scaling all states up; here it is taken per sequence over the tokens that enter its pairs (the subsample when
// there is one), so each L_seq reads alone. The n self pairs stay in the mean, as in the reference: each adds
// exp(0) = 1, which bounds the first term below by -log n. Without them it falls without limit as the states are
// scaled up (measured on the first implementation: -2.5 ... -2571 for scales 0.1 ... 4), and the norm penalty
// alone does not stop that.
// ||z_i - z_j||^2 = ||z_i||^2 + ||z_j||^2 - 2 z_i . z_j from one batched matmul, clamped at 0 against rounding.
#include "spread/losses/dispersion.h"

namespace spread {

torch::Tensor l2_repel_dispersion(const torch::Tensor& hidden, const torch::Tensor& mask,
                                  const DispersionOptions& opt) {
  using namespace dispersion_parts;
  const auto acc = accumulate_dtype(hidden);
  Pairs p = pairs(mask, hidden.size(0), hidden.size(1), acc, hidden.device(), /*with_self=*/true);
  torch::Tensor z = zero_padding(hidden, mask);
  torch::Tensor g = gram(z).to(acc);
  torch::Tensor sq = torch::linalg_vector_norm(z, 2, {-1}, false, acc).square();  // [B, T] ||z_i||^2, 0 at padding
  torch::Tensor dist2 = (sq.unsqueeze(2) + sq.unsqueeze(1) - 2 * g).clamp_min(0);
  torch::Tensor repel = log_mean_exp(dist2 * (-1.0 / opt.tau), p);
  torch::Tensor norm_penalty = sq.sum(1) / (p.tokens.clamp_min(1) * static_cast<double>(hidden.size(2)));
  return sequence_mean(repel + 0.1 * norm_penalty, p);
}

}  // namespace spread
