#include "spread/model/norm.h"

#include <ATen/ATen.h>

namespace spread {

NormImpl::NormImpl(const NormOptions& options) : options_(options) {
  weight = register_parameter("weight", torch::ones({options.dim}));
  if (options.bias && !options.rms) bias = register_parameter("bias", torch::zeros({options.dim}));
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  // At least float32 (bf16 inputs are widened, float64 ones kept, for the gradient checks).
  const auto x32 = x.to(at::promote_types(x.scalar_type(), at::kFloat));
  const auto normed = x32 * at::rsqrt(x32.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return weight * normed.to(x.scalar_type());
}

torch::Tensor NormImpl::forward(const torch::Tensor& x) const {
  if (!options_.rms) return at::layer_norm(x, {options_.dim}, weight, bias, options_.eps);
  return rms_norm(x, weight, options_.eps);
}

}  // namespace spread
