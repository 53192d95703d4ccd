#pragma once
// Linear layers of float32 CPU activations whose products go straight to a GEMM found in the process
// (runtime/direct_mm.h) and are written in float32:
//   bf16 products: x and W rounded to bf16, every product (y, dx = G W, dW = G^T x) through the bf16 GEMM with
//     float32 accumulation. LibTorch's bf16 mm instead writes a bf16 result that is then widened, and its backward
//     goes through two more casts and a bf16 dW: passes this path does not make, and one rounding less in every
//     output and weight gradient.
//   float32 products, in a module that is training: y, dx and dW through oneDNN's dnnl_sgemm (where the process
//     has it and OpenBLAS runs on OpenMP), which trained shapes A and B faster on the AMD EPYC than OpenBLAS's
//     sgemm_ (docs/benchmarks.md). A training module's passes without gradients take it too: a cached
//     contrastive step embeds without gradients and then differentiates a replay of the same pass, which must
//     compute the same function. In inference (a module in eval mode) float32 layers are LibTorch's linear:
//     OpenBLAS 0.3.21 stayed faster on the forward products of encoders.
// First-order gradients only (no double backward), as model/recompute.h.
#include <ATen/core/Tensor.h>

namespace spread {

// Whether mixed_linear's products in `dtype` (kBFloat16 or kFloat) for the activation x take this path: x float32
// on the CPU, the process has the GEMM that passed its check, and for float32 the layer's module is training.
bool takes_direct_gemm(const at::Tensor& x, at::ScalarType dtype, bool training);

// y = x W^T + b for x [..., in] and weight [out, in] float32, bias [out] or undefined, with the products in `dtype`
// as above and db a float32 sum. Only where takes_direct_gemm(x, dtype, training).
at::Tensor direct_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, at::ScalarType dtype);

// The forward product alone in `dtype` through the same GEMM, recording nothing: for nodes that compute their own
// backward (model/recompute.h), which ask takes_direct_gemm when they are made.
at::Tensor direct_linear_product(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                                 at::ScalarType dtype);

}  // namespace spread
