// Alignment and uniformity (Wang & Isola 2020; docs/design.md §7.4), in float64 under no_grad. Formulas in alignment.h.
// Squared distances come from the Gram matrix, ||u_i - u_j||^2 = n_i + n_j - 2 u_i.u_j with n_i = ||u_i||^2 (1, or
// 0 for an all-zero row), clamped at 0 against rounding; exp(-2 d^2) lies in [e^-8, 1], so a plain sum of
// exponentials neither under- nor overflows.
#include "spread/diagnostics/alignment.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace spread {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int64_t kBlockRows = 1024;  // uniformity holds a kBlockRows x N block of the distance matrix at a time

torch::Tensor unit_rows64(const torch::Tensor& x, const char* who) {
  if (x.dim() != 2) throw std::invalid_argument(std::string(who) + ": embeddings must be [N, d]");
  torch::Tensor x64 = x.detach().to(torch::kFloat64);
  return x64 / x64.norm(2, {-1}, /*keepdim=*/true).clamp_min(1e-12);
}

}  // namespace

double alignment(const torch::Tensor& u, const torch::Tensor& v) {
  torch::NoGradGuard no_grad;
  if (u.dim() != 2 || !u.sizes().equals(v.sizes()))
    throw std::invalid_argument("alignment: u and v must be [N, d] with the same shape");
  if (u.size(0) == 0) return kNaN;
  torch::Tensor diff = unit_rows64(u, "alignment") - unit_rows64(v, "alignment").to(u.device());
  return diff.square().sum(1).mean().item<double>();
}

double uniformity(const torch::Tensor& u) {
  torch::NoGradGuard no_grad;
  torch::Tensor x = unit_rows64(u, "uniformity");
  const int64_t n = x.size(0);
  if (n < 2) return kNaN;
  torch::Tensor sq = x.square().sum(1);  // [N] n_i
  torch::Tensor column = torch::arange(n, torch::dtype(torch::kLong).device(x.device()));
  torch::Tensor total = torch::zeros({}, x.options());
  for (int64_t r0 = 0; r0 < n - 1; r0 += kBlockRows) {
    const int64_t rows = std::min(kBlockRows, n - r0);
    torch::Tensor block = x.narrow(0, r0, rows);
    torch::Tensor d2 = (sq.narrow(0, r0, rows).unsqueeze(1) + sq.unsqueeze(0) - 2 * torch::mm(block, x.t()))
                           .clamp_min(0);                                                 // [rows, N]
    torch::Tensor upper = column.unsqueeze(0) > column.narrow(0, r0, rows).unsqueeze(1);  // j > i
    total += torch::exp(-2 * d2).masked_fill(upper.logical_not(), 0).sum();
  }
  const double pairs = 0.5 * double(n) * double(n - 1);
  return std::log(total.item<double>() / pairs);
}

}  // namespace spread
