#pragma once
// Matrix products of LibTorch CPU tensors straight through a GEMM found in the process (runtime/gemm.h), with a
// float32 result: bf16 operands through the bf16 GEMM (float32 accumulation), float32 ones through oneDNN's
// dnnl_sgemm. Only where has_direct_mm(dtype).
#include <ATen/core/Tensor.h>

#include "spread/runtime/gemm.h"

namespace spread {

// Whether the process has the GEMM for operands of this dtype (kBFloat16 or kFloat).
bool has_direct_mm(at::ScalarType dtype);

// A bf16 CPU tensor's elements as the bf16 GEMM takes them.
const Bf16* bf16_bits(const at::Tensor& t);

// a [m, k] b [k, n] for CPU matrices of one dtype (each contiguous, or the transpose of a contiguous one; any other
// layout is copied first): float32 [m, n].
at::Tensor direct_mm(const at::Tensor& a, const at::Tensor& b);
// The same product written into c (float32 [m, n], contiguous), which is returned.
at::Tensor& direct_mm_out(at::Tensor& c, const at::Tensor& a, const at::Tensor& b);
// The same product added to c (float32 [m, n], contiguous), which is returned.
at::Tensor& direct_addmm_(at::Tensor& c, const at::Tensor& a, const at::Tensor& b);

// How many products of each operand dtype these functions have run in this process: which path a layer takes
// cannot be told from its numbers (oneDNN's and OpenBLAS's float32 products often agree bitwise), so the tests
// of the wiring count.
int64_t direct_products_run(at::ScalarType dtype);

}  // namespace spread
