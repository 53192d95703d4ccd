// Dispersion loss, angular variant (Liu et al. 2026, arXiv:2602.00217; docs/design.md §3.2; the default).
//   zh_i = z_i / (||z_i|| + 1e-4),  C = zh zh^T,  C' = C + (clamp(C, -1+t, 1-t) - C).detach(),  D = arccos(C') / pi
//   L_seq = log mean_{i != j} exp(-D_ij / tau) = logsumexp_{i != j}(-D_ij / tau) - log(n (n - 1))
//   L = mean over sequences with n >= 2 of L_seq
// Lower is more spread: orthogonal tokens give -1/(2 tau), identical ones -arccos(1-t)/(pi tau) (about -0.009 at t = 1e-4, tau = 0.5).
// The clamp keeps arccos and its derivative finite at |C| -> 1 while its straight-through gradient still pushes
// coinciding tokens apart (a plain clamp would give them a zero gradient). Cost: one batched matmul forward, one
// backward (cosine_gram), and a handful of [B,T,T] elementwise passes; padding is zeroed first and masked out of
// the logsumexp. 1-2% of a training step of a 6-layer, width 384, block 256, batch 8 GPT on 2 CPU cores
// (build/bench_step, docs/benchmarks.md).
#include "spread/losses/dispersion.h"

namespace spread {

torch::Tensor angular_dispersion(const torch::Tensor& hidden, const torch::Tensor& mask,
                                 const DispersionOptions& opt) {
  using namespace dispersion_parts;
  const auto acc = accumulate_dtype(hidden);
  Pairs p = pairs(mask, hidden.size(0), hidden.size(1), acc, hidden.device());
  torch::Tensor d = angular_distance(zero_padding(hidden, mask), opt.clamp, acc);
  return sequence_mean(log_mean_exp(d * (-1.0 / opt.tau), p), p);
}

}  // namespace spread
