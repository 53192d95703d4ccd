// Dispersion loss, decorrelation variant (the reference code's "decorrelation"; docs/design.md §3.3).
//   c_i = z_i - mean_f(z_if)                          (each token centred over its own F features)
//   r_ij = c_i . c_j / ((||c_i|| + 1e-4) (||c_j|| + 1e-4))
//   L_seq = mean_{i != j} r_ij^2
//   L = mean over sequences with n >= 2 of L_seq
// r is the Pearson correlation between the feature vectors of tokens i and j (the reference's z-scored Gram
// matrix divided by F - 1), with the same 1e-4 guard as the angular variant so a constant token (c = 0) gives
// r = 0 with a finite gradient. Squaring pushes towards uncorrelated tokens, not anti-correlated ones.
#include "spread/losses/dispersion.h"

namespace spread {

torch::Tensor decorrelation_dispersion(const torch::Tensor& hidden, const torch::Tensor& mask,
                                       const DispersionOptions& /*opt*/) {
  using namespace dispersion_parts;
  const auto acc = accumulate_dtype(hidden);
  Pairs p = pairs(mask, hidden.size(0), hidden.size(1), acc, hidden.device());
  torch::Tensor z = zero_padding(hidden, mask);
  torch::Tensor r = cosine_gram(z - z.mean(-1, /*keepdim=*/true), acc);
  return sequence_mean(pair_mean(r.square(), p), p);
}

}  // namespace spread
