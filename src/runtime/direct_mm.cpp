#include "spread/runtime/direct_mm.h"

#include "spread/runtime/blas.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <atomic>

namespace spread {
namespace {

// How the GEMM reads a matrix: row-major as it is, or as the transpose of a row-major one.
struct Operand {
  at::Tensor data;  // the tensor whose memory is read (a copy where the layout is neither)
  bool transposed = false;
  int64_t ld = 0;
};

Operand as_operand(const at::Tensor& t) {
  if (t.is_contiguous()) return {t, false, std::max<int64_t>(t.size(1), 1)};
  if (t.t().is_contiguous()) return {t, true, std::max<int64_t>(t.size(0), 1)};
  return {t.contiguous(), false, std::max<int64_t>(t.size(1), 1)};
}

std::atomic<int64_t> products_run[2];  // bf16, float32

void gemm_into(at::Tensor& c, const at::Tensor& a, const at::Tensor& b, float beta) {
  const auto dtype = a.scalar_type();
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0) && b.scalar_type() == dtype && a.is_cpu() &&
                  b.is_cpu() && (dtype == at::kBFloat16 || dtype == at::kFloat),
              "direct_mm: takes 2-d CPU matrices of one dtype, bf16 or float32: ", a.sizes(), " ", dtype, " times ",
              b.sizes(), " ", b.scalar_type());
  TORCH_CHECK(has_direct_mm(dtype), "direct_mm: this process has no GEMM for ", dtype, " operands");
  TORCH_CHECK(c.is_contiguous() && c.scalar_type() == at::kFloat && c.size(0) == a.size(0) && c.size(1) == b.size(1),
              "direct_mm: the output must be contiguous float32 [", a.size(0), ", ", b.size(1), "]");
  products_run[dtype == at::kFloat].fetch_add(1, std::memory_order_relaxed);
  const int64_t m = a.size(0), n = b.size(1), k = a.size(1);
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (beta == 0) c.zero_();
    return;
  }
  const Operand A = as_operand(a), B = as_operand(b);
  if (dtype == at::kBFloat16)
    row_major_gemm(A.transposed, B.transposed, m, n, k, 1.0f, bf16_bits(A.data), A.ld, bf16_bits(B.data), B.ld, beta,
                   c.data_ptr<float>(), n);
  else
    onednn_row_major_sgemm(A.transposed, B.transposed, m, n, k, 1.0f, A.data.data_ptr<float>(), A.ld,
                           B.data.data_ptr<float>(), B.ld, beta, c.data_ptr<float>(), n);
}

}  // namespace

int64_t direct_products_run(at::ScalarType dtype) {
  return dtype == at::kBFloat16 || dtype == at::kFloat ? products_run[dtype == at::kFloat].load() : 0;
}

bool has_direct_mm(at::ScalarType dtype) {
  if (dtype == at::kBFloat16) return has_bf16_gemm();
  // With OpenBLAS's own pthreads LibTorch (and so oneDNN, on OpenMP) runs on one thread (runtime/blas.h): there
  // OpenBLAS's threaded sgemm_ stays.
  static const bool blas_threads_itself = blas_info().threading == "pthread";
  return dtype == at::kFloat && has_onednn_sgemm() && !blas_threads_itself;
}

const Bf16* bf16_bits(const at::Tensor& t) { return reinterpret_cast<const Bf16*>(t.data_ptr<at::BFloat16>()); }

at::Tensor direct_mm(const at::Tensor& a, const at::Tensor& b) {
  auto c = at::empty({a.size(0), b.size(1)}, a.options().dtype(at::kFloat));
  return direct_mm_out(c, a, b);
}

at::Tensor& direct_mm_out(at::Tensor& c, const at::Tensor& a, const at::Tensor& b) {
  gemm_into(c, a, b, 0.0f);
  return c;
}

at::Tensor& direct_addmm_(at::Tensor& c, const at::Tensor& a, const at::Tensor& b) {
  gemm_into(c, a, b, 1.0f);
  return c;
}

}  // namespace spread
