#pragma once
// A block's residual add and the LayerNorm (or RMSNorm) that reads its result, as one autograd node. A pre-norm transformer
// computes h = x + branch(...) and then layer_norm(h) (the next sublayer's input, or the final norm): separately
// that is a pass to write h, a pass to normalise it, and in backward a pass to add the norm's gradient to the
// residual one. Fused it is one pass each way, and the branch's output bias (the projection's, which the branch
// then leaves out) is added in the same pass, its gradient summed in the backward pass.
#include <ATen/core/Tensor.h>

#include <utility>

namespace spread {

// {h, layer_norm(h; weight, bias, eps)} for h = x + a + a_bias over the last dimension C. x and a: [..., C];
// a_bias, weight, bias: [C]; a_bias may be undefined (nothing added). Gradients reach every tensor input.
// On CPU float32 spread's vectorised row loops (row chunks independent of the thread count, so the numbers are
// too); elsewhere (CUDA, 16-bit) LibTorch's add and layer_norm.
std::pair<at::Tensor, at::Tensor> residual_layer_norm(const at::Tensor& x, const at::Tensor& a, const at::Tensor& a_bias,
                                                      const at::Tensor& weight, const at::Tensor& bias, double eps);

// The same for either norm of model/norm.h: a LayerNorm whose bias may be undefined (none), or with rms an RMSNorm
// (h * rsqrt(mean(h^2) + eps) * weight; bias must be undefined).
std::pair<at::Tensor, at::Tensor> residual_norm(const at::Tensor& x, const at::Tensor& a, const at::Tensor& a_bias,
                                                const at::Tensor& weight, const at::Tensor& bias, double eps,
                                                bool rms);

}  // namespace spread
