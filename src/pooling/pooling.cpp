// Mean, CLS, last-token, max and weighted-mean pooling of token states into text embeddings (docs/design.md §4;
// formulas in pooling.h). Padding is removed by selection (masked_fill, gather), never by multiplying with the mask:
// 0 * NaN is NaN, so a multiplied-out pad holding garbage would still poison the embedding and its gradient.
#include "spread/pooling/pooling.h"

#include <torch/torch.h>

#include <stdexcept>

namespace spread {

namespace {

void check_inputs(const torch::Tensor& hidden, const torch::Tensor& mask, const char* who) {
  TORCH_CHECK(hidden.dim() == 3 && hidden.is_floating_point(), who, ": hidden must be a float [B, T, F] tensor");
  TORCH_CHECK(hidden.size(1) >= 1, who, ": hidden has no positions");
  TORCH_CHECK(!mask.defined() || (mask.dim() == 2 && mask.size(0) == hidden.size(0) &&
                                  mask.size(1) == hidden.size(1)),
              who, ": mask must be [B, T] like hidden");
}

torch::Tensor bool_mask(const torch::Tensor& mask, const torch::Device& device) {
  return mask.to(device, torch::kBool);
}

}  // namespace

torch::Tensor mean_pool(const torch::Tensor& hidden, const torch::Tensor& mask) {
  check_inputs(hidden, mask, "mean_pool");
  const auto acc = hidden.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  if (!mask.defined()) return hidden.sum(1, /*keepdim=*/false, acc).div(double(hidden.size(1))).to(hidden.dtype());
  torch::Tensor m = bool_mask(mask, hidden.device());
  torch::Tensor sum = hidden.masked_fill(m.logical_not().unsqueeze(-1), 0).sum(1, /*keepdim=*/false, acc);
  torch::Tensor count = m.sum(1, /*keepdim=*/true).clamp_min(1).to(acc);  // [B, 1]; 1 for an empty text
  return (sum / count).to(hidden.dtype());
}

torch::Tensor cls_pool(const torch::Tensor& hidden, const torch::Tensor& mask) {
  check_inputs(hidden, mask, "cls_pool");
  return hidden.select(1, 0);
}

torch::Tensor last_token_pool(const torch::Tensor& hidden, const torch::Tensor& mask) {
  check_inputs(hidden, mask, "last_token_pool");
  if (!mask.defined()) return hidden.select(1, hidden.size(1) - 1);
  torch::Tensor m = bool_mask(mask, hidden.device());
  // position j where valid, 0 elsewhere; the maximum is the last valid position (0 for an empty text).
  torch::Tensor positions = torch::arange(hidden.size(1), torch::dtype(torch::kLong).device(hidden.device()));
  torch::Tensor last = positions.unsqueeze(0).masked_fill(m.logical_not(), 0).amax(1);  // [B]
  torch::Tensor index = last.view({-1, 1, 1}).expand({hidden.size(0), 1, hidden.size(2)});
  return hidden.gather(1, index).squeeze(1);
}

torch::Tensor max_pool(const torch::Tensor& hidden, const torch::Tensor& mask) {
  check_inputs(hidden, mask, "max_pool");
  if (!mask.defined()) return std::get<0>(hidden.max(1));
  torch::Tensor m = bool_mask(mask, hidden.device());
  return std::get<0>(hidden.masked_fill(m.logical_not().unsqueeze(-1), -1e9).max(1));
}

torch::Tensor weighted_mean_pool(const torch::Tensor& hidden, const torch::Tensor& mask) {
  check_inputs(hidden, mask, "weighted_mean_pool");
  const auto acc = hidden.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  torch::Tensor weights = torch::arange(1, hidden.size(1) + 1, torch::dtype(acc).device(hidden.device()))
                              .unsqueeze(0)
                              .expand({hidden.size(0), hidden.size(1)});
  if (mask.defined()) weights = weights.masked_fill(bool_mask(mask, hidden.device()).logical_not(), 0);
  torch::Tensor valid = mask.defined() ? bool_mask(mask, hidden.device()) : torch::ones_like(weights, torch::kBool);
  torch::Tensor sum = (hidden.masked_fill(valid.logical_not().unsqueeze(-1), 0).to(acc) * weights.unsqueeze(-1)).sum(1);
  return (sum / weights.sum(1, /*keepdim=*/true).clamp_min(1e-9)).to(hidden.dtype());
}

Pooling parse_pooling(const std::string& name) {
  if (name == "mean") return Pooling::Mean;
  if (name == "cls") return Pooling::Cls;
  if (name == "last") return Pooling::LastToken;
  if (name == "max") return Pooling::Max;
  if (name == "weightedmean") return Pooling::WeightedMean;
  throw std::invalid_argument("unknown pooling '" + name + "' (valid: mean, cls, last, max, weightedmean)");
}

torch::Tensor pool(Pooling p, const torch::Tensor& hidden, const torch::Tensor& mask) {
  switch (p) {
    case Pooling::Mean: return mean_pool(hidden, mask);
    case Pooling::Cls: return cls_pool(hidden, mask);
    case Pooling::LastToken: return last_token_pool(hidden, mask);
    case Pooling::Max: return max_pool(hidden, mask);
    case Pooling::WeightedMean: return weighted_mean_pool(hidden, mask);
  }
  throw std::invalid_argument("pool: unknown Pooling value");
}

}  // namespace spread
