#pragma once
// Matrix products through the process's BLAS (the one LibTorch loads: OpenBLAS's AVX2/AVX-512 kernels), for
// code that does not use LibTorch: Eigen, compiled for the x86-64 baseline here, runs float64 products at a
// fraction of that speed.
#include <cstdint>
#include <cstring>

namespace spread {

// C = A^T B with column-major A (k x m, leading dimension lda), B (k x n, ldb) and C (m x n, ldc), through the
// BLAS's dgemm_ / sgemm_ on the BLAS's own threads (call it from one thread at a time). Returns false and leaves C
// alone when the process has no such BLAS or it fails a check of its calling convention: the caller then computes
// the product itself.
bool blas_gemm_tn(int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b, int64_t ldb,
                  double* c, int64_t ldc);
bool blas_gemm_tn(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                  int64_t ldc);

// Row-major C (m x n) = alpha op(A) op(B) + beta C, op(X) = X or X^T, each matrix with its row stride (lda, ldb,
// ldc). Threads: the library's own (OpenMP in OpenBLAS's OpenMP build, oneDNN and MKL: one thread inside a
// parallel region; OpenBLAS's pthread build threads there too).
// float32: the process's sgemm_, the one blas_gemm_tn calls. Only after has_sgemm() returned true.
bool has_sgemm();
void row_major_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                    int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// float32 through oneDNN's dnnl_sgemm (Debian's LibTorch links libdnnl, which exports it), found and checked like
// sgemm_. Only after has_onednn_sgemm() returned true; a failing call throws.
bool has_onednn_sgemm();
void onednn_row_major_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                            int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// bf16 values as their bits (the upper half of a float32), the type both bf16 GEMMs below take.
using Bf16 = uint16_t;

inline Bf16 to_bf16(float f) {  // round to nearest even (finite values)
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return Bf16((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

// bf16 A and B, float32 accumulation and C: oneDNN's dnnl_gemm_bf16bf16f32 (Debian's LibTorch links libdnnl, which
// exports it) or MKL's cblas_gemm_bf16bf16f32 (the torch wheel's LibTorch exports it), found in the process and
// checked on a small product like sgemm_. Only after has_bf16_gemm() returned true; a failing oneDNN call throws.
bool has_bf16_gemm();
void row_major_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const Bf16* a,
                    int64_t lda, const Bf16* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace spread
