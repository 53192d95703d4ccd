// Geometry diagnostics of token representations (docs/design.md §7.1, §7.2): mean cosine within texts, batch mean
// cosine across texts, and concentration S(X)/||mu||^2. Everything in float64 on the CPU under no_grad; the per-text
// values use O(n F) identities, never an n x n matrix.
//   mean_cos_excl = (||sum_j u_j||^2 - sum_j ||u_j||^2) / (n (n - 1)), which equals (n mean_cos_incl - 1)/(n - 1)
//   whenever no row is exactly zero, and otherwise still equals the brute-force mean over j != k (a zero row has
//   u = 0, so cosine 0 with everything, itself included).
#include "spread/diagnostics/geometry.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <stdexcept>

namespace spread {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

torch::Tensor unit_rows64(const torch::Tensor& x) {  // u = x / max(||x||, 1e-12)
  return x / x.norm(2, {-1}, /*keepdim=*/true).clamp_min(1e-12);
}

torch::Tensor as_list(const torch::Tensor& x) {
  if (x.dim() != 2) throw std::invalid_argument("geometry: a token list must be [n, F]");
  return x.detach().to(torch::kCPU, torch::kFloat64);
}

// Mean of `values` over the entries where `keep` is true; NaN when none is.
double masked_mean(const torch::Tensor& values, const torch::Tensor& keep) {
  int64_t n = keep.sum().item<int64_t>();
  return n == 0 ? kNaN : values.masked_select(keep).sum().item<double>() / static_cast<double>(n);
}

// Valid rows of one batch, flattened: u [N, F] unit rows and text [N] the index of the text each came from.
struct FlatTokens {
  torch::Tensor u;
  torch::Tensor text;
};

FlatTokens flat_tokens(const torch::Tensor& x, const torch::Tensor& mask) {
  torch::Tensor text = torch::arange(x.size(0), torch::kLong).unsqueeze(1).expand({x.size(0), x.size(1)});
  return {unit_rows64(x.index({mask})), text.index({mask})};
}

// Uniform draws (with replacement) of unordered pairs of tokens from different texts, by rejection: an ordered
// pair of tokens drawn uniformly is kept when its two texts differ, which makes every cross-text pair equally
// likely. Chunks are sized from the known acceptance rate so the loop usually runs once.
double sampled_cross_cos(const FlatTokens& t, double accept_rate, uint64_t seed, int64_t max_pairs) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const int64_t n = t.u.size(0);
  double sum = 0;
  int64_t kept = 0;
  while (kept < max_pairs) {
    int64_t chunk = std::min<int64_t>(static_cast<int64_t>(1.2 * (max_pairs - kept) / accept_rate) + 64, 1 << 22);
    torch::Tensor i = torch::randint(n, {chunk}, gen, torch::kLong);
    torch::Tensor j = torch::randint(n, {chunk}, gen, torch::kLong);
    torch::Tensor cross = t.text.index_select(0, i) != t.text.index_select(0, j);
    i = i.masked_select(cross).narrow(0, 0, std::min<int64_t>(cross.sum().item<int64_t>(), max_pairs - kept));
    j = j.masked_select(cross).narrow(0, 0, i.size(0));
    sum += (t.u.index_select(0, i) * t.u.index_select(0, j)).sum().item<double>();
    kept += i.size(0);
  }
  return sum / static_cast<double>(max_pairs);
}

}  // namespace

double mean_cos_incl(const torch::Tensor& x) {
  torch::NoGradGuard no_grad;
  torch::Tensor x64 = as_list(x);
  if (x64.size(0) == 0) throw std::invalid_argument("mean_cos_incl needs at least one token");
  return unit_rows64(x64).mean(0).square().sum().item<double>();
}

double mean_cos_excl(const torch::Tensor& x) {
  torch::NoGradGuard no_grad;
  torch::Tensor u = unit_rows64(as_list(x));
  const double n = static_cast<double>(u.size(0));
  if (n < 2) throw std::invalid_argument("mean_cos_excl needs at least two tokens");
  double all_pairs = u.sum(0).square().sum().item<double>();
  double self_pairs = u.square().sum().item<double>();
  return (all_pairs - self_pairs) / (n * (n - 1));
}

double concentration(const torch::Tensor& x) {
  torch::NoGradGuard no_grad;
  torch::Tensor x64 = as_list(x);
  if (x64.size(0) == 0) throw std::invalid_argument("concentration needs at least one token");
  torch::Tensor mu = x64.mean(0);
  double spread = (x64 - mu).square().sum(1).mean().item<double>();  // S(X) = tr Sigma
  return spread / mu.square().sum().item<double>();
}

double batch_mean_cos(const torch::Tensor& hidden, const torch::Tensor& mask, uint64_t seed, int64_t max_pairs) {
  torch::NoGradGuard no_grad;
  torch::Tensor x = hidden.detach().to(torch::kCPU, torch::kFloat64);
  torch::Tensor m = mask.defined() ? mask.to(torch::kCPU, torch::kBool)
                                   : torch::ones({x.size(0), x.size(1)}, torch::kBool);
  torch::Tensor n = m.sum(1).to(torch::kFloat64);
  const double total = n.sum().item<double>();
  const double cross_ordered = total * total - n.square().sum().item<double>();  // ordered cross-text pairs
  if (cross_ordered <= 0) return kNaN;
  if (cross_ordered / 2 <= static_cast<double>(max_pairs)) {
    // Every pair fits in the budget: the exact mean, sum_{a != b} s_a . s_b over the ordered pair count.
    torch::Tensor s = unit_rows64(x).masked_fill(m.logical_not().unsqueeze(-1), 0).sum(1);  // [B, F]
    double cross = s.sum(0).square().sum().item<double>() - s.square().sum().item<double>();
    return cross / cross_ordered;
  }
  return sampled_cross_cos(flat_tokens(x, m), cross_ordered / (total * total), seed, max_pairs);
}

GeometryStats geometry_stats(const torch::Tensor& hidden, const torch::Tensor& mask, uint64_t seed,
                             int64_t max_pairs) {
  torch::NoGradGuard no_grad;
  if (hidden.dim() != 3) throw std::invalid_argument("geometry_stats: hidden must be [B, T, F]");
  torch::Tensor x = hidden.detach().to(torch::kCPU, torch::kFloat64);
  torch::Tensor m = mask.defined() ? mask.to(torch::kCPU, torch::kBool)
                                   : torch::ones({x.size(0), x.size(1)}, torch::kBool);
  torch::Tensor pad = m.logical_not().unsqueeze(-1);
  x = x.masked_fill(pad, 0);
  torch::Tensor n = m.sum(1).to(torch::kFloat64);  // [B]

  torch::Tensor u = unit_rows64(x);  // 0 at padding
  torch::Tensor all_pairs = u.sum(1).square().sum(-1);
  torch::Tensor self_pairs = u.square().sum({1, 2});
  torch::Tensor incl = all_pairs / n.square();
  torch::Tensor excl = (all_pairs - self_pairs) / (n * (n - 1));

  torch::Tensor mu = x.sum(1) / n.unsqueeze(1);  // [B, F]
  torch::Tensor spread = (x - mu.unsqueeze(1)).masked_fill(pad, 0).square().sum({1, 2}) / n;
  torch::Tensor conc = spread / mu.square().sum(-1);

  GeometryStats g;
  g.mean_cos_incl = masked_mean(incl, n >= 1);
  g.mean_cos_excl = masked_mean(excl, n >= 2);
  g.concentration = masked_mean(conc, n >= 1);
  g.batch_mean_cos = batch_mean_cos(x, m, seed, max_pairs);
  return g;
}

}  // namespace spread
