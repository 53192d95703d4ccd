#include "spread/runtime/bf16_mm.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace spread {
namespace {

// How the GEMM reads a matrix: row-major as it is, or as the transpose of a row-major one.
struct Operand {
  at::Tensor data;  // the tensor whose memory is read (a copy where the layout is neither)
  bool transposed = false;
  int64_t ld = 0;
};

Operand as_operand(const at::Tensor& t) {
  TORCH_CHECK(t.dim() == 2 && t.scalar_type() == at::kBFloat16 && t.is_cpu(),
              "bf16_mm: takes 2-d bf16 CPU matrices, got ", t.sizes(), " ", t.scalar_type());
  if (t.is_contiguous()) return {t, false, std::max<int64_t>(t.size(1), 1)};
  if (t.t().is_contiguous()) return {t, true, std::max<int64_t>(t.size(0), 1)};
  return {t.contiguous(), false, std::max<int64_t>(t.size(1), 1)};
}

void gemm_into(at::Tensor& c, const at::Tensor& a, const at::Tensor& b, float beta) {
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "bf16_mm: ", a.sizes(), " times ", b.sizes());
  TORCH_CHECK(c.is_contiguous() && c.scalar_type() == at::kFloat && c.size(0) == a.size(0) && c.size(1) == b.size(1),
              "bf16_mm: the output must be contiguous float32 [", a.size(0), ", ", b.size(1), "]");
  const int64_t m = a.size(0), n = b.size(1), k = a.size(1);
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (beta == 0) c.zero_();
    return;
  }
  const Operand A = as_operand(a), B = as_operand(b);
  row_major_gemm(A.transposed, B.transposed, m, n, k, 1.0f, bf16_bits(A.data), A.ld, bf16_bits(B.data), B.ld, beta,
                 c.data_ptr<float>(), n);
}

}  // namespace

const Bf16* bf16_bits(const at::Tensor& t) { return reinterpret_cast<const Bf16*>(t.data_ptr<at::BFloat16>()); }

at::Tensor bf16_mm(const at::Tensor& a, const at::Tensor& b) {
  auto c = at::empty({a.size(0), b.size(1)}, a.options().dtype(at::kFloat));
  return bf16_mm_out(c, a, b);
}

at::Tensor& bf16_mm_out(at::Tensor& c, const at::Tensor& a, const at::Tensor& b) {
  gemm_into(c, a, b, 0.0f);
  return c;
}

at::Tensor& bf16_addmm_(at::Tensor& c, const at::Tensor& a, const at::Tensor& b) {
  gemm_into(c, a, b, 1.0f);
  return c;
}

}  // namespace spread
