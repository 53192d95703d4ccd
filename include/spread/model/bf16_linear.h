#pragma once
// bf16 products of float32 CPU linear layers straight through the process's bf16 GEMM (runtime/gemm.h): the
// operands are rounded to bf16, the products accumulate in float32 and are written in float32. LibTorch's bf16 mm
// instead writes a bf16 result that is then widened, and its backward goes through two more casts and a bf16 dW:
// four passes over the activations that this path does not make, and one rounding less in every output.
#include <ATen/core/Tensor.h>

namespace spread {

// Whether mixed_linear's bf16 products for the activation x take this path: x float32 on the CPU, and the process
// has a bf16 GEMM that passed its check.
bool takes_bf16_gemm(const at::Tensor& x);

// a [m, k] b [k, n] for bf16 CPU matrices (each contiguous, or the transpose of a contiguous one): float32 [m, n].
at::Tensor bf16_mm(const at::Tensor& a, const at::Tensor& b);
// The same product added to c (float32 [m, n], contiguous), which is returned.
at::Tensor& bf16_addmm_(at::Tensor& c, const at::Tensor& a, const at::Tensor& b);

// y = x W^T + b for x [..., in] and weight [out, in] float32, bias [out] or undefined, with all three products in
// bf16 as above (dx = G W, dW = G^T x) and db a float32 sum. Only where takes_bf16_gemm(x).
at::Tensor bf16_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

}  // namespace spread
