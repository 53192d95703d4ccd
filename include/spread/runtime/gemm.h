#pragma once
// Matrix products through the process's BLAS (the one LibTorch loads: OpenBLAS's AVX2/AVX-512 kernels), for
// code that does not use LibTorch: Eigen, compiled for the x86-64 baseline here, runs float64 products at a
// fraction of that speed.
#include <cstdint>

namespace spread {

// C = A^T B with column-major A (k x m, leading dimension lda), B (k x n, ldb) and C (m x n, ldc), through the
// BLAS's dgemm_ / sgemm_ on the BLAS's own threads (call it from one thread at a time). Returns false and leaves C
// alone when the process has no such BLAS or it fails a check of its calling convention: the caller then computes
// the product itself.
bool blas_gemm_tn(int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b, int64_t ldb,
                  double* c, int64_t ldc);
bool blas_gemm_tn(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                  int64_t ldc);

}  // namespace spread
