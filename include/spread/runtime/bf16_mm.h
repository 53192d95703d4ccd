#pragma once
// bf16 matrix products of LibTorch tensors through the process's bf16 GEMM (runtime/gemm.h): bf16 operands,
// float32 accumulation, a float32 result. Only where has_bf16_gemm() (runtime/gemm.h) returned true.
#include <ATen/core/Tensor.h>

#include "spread/runtime/gemm.h"

namespace spread {

// A bf16 CPU tensor's elements as the GEMM takes them.
const Bf16* bf16_bits(const at::Tensor& t);

// a [m, k] b [k, n] for bf16 CPU matrices (each contiguous, or the transpose of a contiguous one; any other layout is
// copied first): float32 [m, n].
at::Tensor bf16_mm(const at::Tensor& a, const at::Tensor& b);
// The same product written into c (float32 [m, n], contiguous), which is returned.
at::Tensor& bf16_mm_out(at::Tensor& c, const at::Tensor& a, const at::Tensor& b);
// The same product added to c (float32 [m, n], contiguous), which is returned.
at::Tensor& bf16_addmm_(at::Tensor& c, const at::Tensor& a, const at::Tensor& b);

}  // namespace spread
