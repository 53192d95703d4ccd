#pragma once
// bf16 products of float32 CPU linear layers straight through the process's bf16 GEMM (runtime/bf16_mm.h): the
// operands are rounded to bf16, the products accumulate in float32 and are written in float32. LibTorch's bf16 mm
// instead writes a bf16 result that is then widened, and its backward goes through two more casts and a bf16 dW:
// passes over the activations that this path does not make, and one rounding less in every output.
// First-order gradients only (no double backward), as model/recompute.h.
#include <ATen/core/Tensor.h>

namespace spread {

// Whether mixed_linear's bf16 products for the activation x take this path: x float32 on the CPU, and the process
// has a bf16 GEMM that passed its check.
bool takes_bf16_gemm(const at::Tensor& x);

// y = x W^T + b for x [..., in] and weight [out, in] float32, bias [out] or undefined, with all three products in
// bf16 as above (dx = G W, dW = G^T x) and db a float32 sum. Only where takes_bf16_gemm(x).
at::Tensor bf16_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// The forward product alone, recording nothing: for nodes that compute their own backward (model/recompute.h).
at::Tensor bf16_linear_product(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

}  // namespace spread
