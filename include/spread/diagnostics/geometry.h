#pragma once
// Geometry diagnostics of token representations (docs/design.md §7.1 and §7.2), computed in float64 under no_grad.
//   mean_cos_incl = (1/n^2) sum_{j,k} cos(x_j, x_k) = ||mean_j u_j||^2,  u_j = x_j / max(||x_j||, 1e-12)
//   mean_cos_excl = (n * mean_cos_incl - 1) / (n - 1)                  (self pairs removed, n >= 2)
//   concentration = S(X) / ||mu||^2,  S(X) = (1/n) sum_j ||x_j - mu||^2
//   batch_mean_cos = mean cosine over sampled pairs of tokens from *different* texts (seeded, <= max_pairs)
#include <cstdint>
#include <torch/types.h>

namespace spread {

struct GeometryStats {
  double mean_cos_incl = 0;   // mean over texts
  double mean_cos_excl = 0;   // mean over texts with n >= 2
  double batch_mean_cos = 0;  // NaN when fewer than two texts
  double concentration = 0;   // mean over texts
};

// hidden: [B, T, F] (any float dtype); mask: [B, T] bool, true = valid token. Texts with no valid token are skipped.
// A mean over no text is NaN. mean_cos_excl uses (||sum u||^2 - sum ||u||^2) / (n (n - 1)), the formula above
// whenever no valid row is exactly zero (a zero row has u = 0: cosine 0 with every row, itself included).
GeometryStats geometry_stats(const torch::Tensor& hidden, const torch::Tensor& mask, uint64_t seed,
                             int64_t max_pairs = 4096);

// Per-text helpers on one list X: [n, F].
double mean_cos_incl(const torch::Tensor& x);
double mean_cos_excl(const torch::Tensor& x);  // requires n >= 2
double concentration(const torch::Tensor& x);

// The batch_mean_cos of geometry_stats alone (mask may be undefined: all valid). When every unordered pair of
// valid tokens from different texts fits in max_pairs, the exact mean over all of them (no sampling); otherwise
// the mean over max_pairs pairs drawn uniformly, with replacement, from those pairs by a generator seeded with
// `seed` (deterministic given seed). NaN when fewer than two texts have a valid token.
double batch_mean_cos(const torch::Tensor& hidden, const torch::Tensor& mask, uint64_t seed,
                      int64_t max_pairs = 4096);

}  // namespace spread
