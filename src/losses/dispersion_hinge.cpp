// Dispersion loss, hinge variant (the reference code's "orthogonalization"; docs/design.md §3.3).
//   D = arccos(C') / pi as in the angular variant (same zh, same straight-through clamp)
//   L_seq = mean_{i != j} max(0, 1/2 - D_ij)^2
//   L = mean over sequences with n >= 2 of L_seq
// Only pairs closer than orthogonal (D < 1/2) are pushed apart, and no further than orthogonal: orthogonal and
// antipodal tokens give 0, identical ones (1/2 - arccos(1-t)/pi)^2.
#include "spread/losses/dispersion.h"

namespace spread {

torch::Tensor hinge_dispersion(const torch::Tensor& hidden, const torch::Tensor& mask, const DispersionOptions& opt) {
  using namespace dispersion_parts;
  const auto acc = accumulate_dtype(hidden);
  Pairs p = pairs(mask, hidden.size(0), hidden.size(1), acc, hidden.device());
  torch::Tensor d = angular_distance(zero_padding(hidden, mask), opt.clamp, acc);
  return sequence_mean(pair_mean((0.5 - d).clamp_min(0).square(), p), p);
}

}  // namespace spread
