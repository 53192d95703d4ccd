// Dispersion loss, cosine variant (docs/design.md §3.3).
//   zh_i = z_i / (||z_i|| + 1e-4)   (the same normalisation as the angular variant)
//   L_seq = mean_{i != j} zh_i . zh_j = (||sum_i zh_i||^2 - sum_i ||zh_i||^2) / (n (n - 1))
//   L = mean over sequences with n >= 2 of L_seq
// zh rather than exact unit vectors keeps the value and gradient finite at z = 0; for ||z|| >> 1e-4 it is the mean
// cosine to within a relative 2e-2/||z||. The identity costs O(n F) per sequence: no [T,T] matrix is formed.
// Orthogonal tokens give 0, identical ones (||z|| / (||z|| + 1e-4))^2, antipodal pairs the negative of that.
#include "spread/losses/dispersion.h"

namespace spread {

torch::Tensor cosine_dispersion(const torch::Tensor& hidden, const torch::Tensor& mask,
                                const DispersionOptions& /*opt*/) {
  using namespace dispersion_parts;
  const auto acc = accumulate_dtype(hidden);
  Pairs p = pairs(mask, hidden.size(0), hidden.size(1), acc, hidden.device());
  torch::Tensor z = zero_padding(hidden, mask);  // padding rows are 0 and drop out of both sums
  torch::Tensor norm = torch::linalg_vector_norm(z, 2, {-1}, /*keepdim=*/false, acc);  // [B, T]
  torch::Tensor s = 1 / (norm + kNormEps);  // zh_i = s_i z_i
  // sum_i zh_i as one [B,1,T]x[B,T,F] product: no [B,T,F] temporary, forward or backward.
  torch::Tensor zh_sum = torch::bmm(s.unsqueeze(1).to(z.scalar_type()), z).squeeze(1).to(acc);  // [B, F]
  torch::Tensor all_pairs = zh_sum.square().sum(-1);   // sum_{i,j} zh_i . zh_j
  torch::Tensor self_pairs = (s * norm).square().sum(1);  // sum_i ||zh_i||^2
  return sequence_mean((all_pairs - self_pairs) / p.count, p);
}

}  // namespace spread
