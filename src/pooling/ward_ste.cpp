// Pooled vectors rebuilt from the live tokens with one scatter-add (formulas in ward_ste.h).
#include "spread/pooling/ward_ste.h"

#include <torch/torch.h>

#include <stdexcept>

namespace spread {
namespace {

// Output row of every token ([B, n] int64): protected tokens their rank among valid tokens, members P' + label;
// padding goes to the spare row K (dropped afterwards).
torch::Tensor output_rows(const torch::Tensor& valid, const torch::Tensor& labels, int64_t K) {
  auto rank = valid.to(torch::kLong).cumsum(1) - 1;
  auto protected_count = (labels.ge(0).logical_not() & valid).to(torch::kLong).sum(1, /*keepdim=*/true);
  auto rows = torch::where(labels.ge(0), protected_count + labels, rank);
  return torch::where(valid, rows, torch::full_like(rows, K));
}

}  // namespace

WardSte parse_ward_ste(const std::string& name) {
  if (name == "mean") return WardSte::kMean;
  if (name == "identity") return WardSte::kIdentity;
  throw std::invalid_argument("ste must be mean or identity, not '" + name + "'");
}

torch::Tensor pooled_with_gradient(const torch::Tensor& tokens, const torch::Tensor& mask, const WardBatch& pooled,
                                   WardSte ste) {
  if (tokens.dim() != 3 || pooled.labels.sizes() != tokens.sizes().slice(0, 2))
    throw std::invalid_argument("pooled_with_gradient: tokens [B, n, d] and the labels ward_pool_batch gave for them");
  const int64_t B = tokens.size(0), n = tokens.size(1), d = tokens.size(2), K = pooled.vectors.size(1);
  const auto labels = pooled.labels.to(tokens.device());
  const auto valid = mask.defined() ? mask.to(tokens.device(), torch::kBool)
                                    : torch::ones({B, n}, labels.options().dtype(torch::kBool));
  const auto rows = output_rows(valid, labels, K);
  const auto flat = (rows + torch::arange(B, rows.options()).view({B, 1}) * (K + 1)).view({-1});
  auto sums = torch::zeros({B * (K + 1), d}, tokens.options()).index_add(0, flat, tokens.reshape({B * n, d}));
  auto counts = torch::zeros({B * (K + 1)}, tokens.options()).index_add(0, flat, torch::ones({B * n}, tokens.options()));
  sums = sums.view({B, K + 1, d}).narrow(1, 0, K);
  counts = counts.view({B, K + 1, 1}).narrow(1, 0, K).clamp_min(1);
  const auto is_cluster = torch::arange(K, rows.options()).view({1, K}) >=
                          (labels.ge(0).logical_not() & valid).to(torch::kLong).sum(1, true);
  namespace F = torch::nn::functional;
  auto means = F::normalize(sums / counts, F::NormalizeFuncOptions().dim(-1).eps(1e-12));
  if (ste == WardSte::kIdentity) means = means.detach() + (sums - sums.detach());
  auto out = torch::where(is_cluster.unsqueeze(-1), means, sums);
  return out * pooled.mask.to(tokens.device()).unsqueeze(-1).to(tokens.scalar_type());
}

}  // namespace spread
