#include "spread/runtime/gemm.h"

#include <dlfcn.h>

#include <algorithm>

namespace spread {
namespace {

template <class T>
using GemmFn = void (*)(const char*, const char*, const int*, const int*, const int*, const T*, const T*, const int*,
                        const T*, const int*, const T*, T*, const int*);

// BLAS integers are passed as zero-extended 64-bit slots: a little-endian LP64 BLAS reads their low 4 bytes, an
// ILP64 one all 8, and both see the same value (as src/model/attention.cpp does for its sgemm_).
struct BlasInt {
  int64_t value;
  const int* ptr() const { return reinterpret_cast<const int*>(&value); }
};

template <class T>
void call_tn(GemmFn<T> fn, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb, T* c,
             int64_t ldc) {
  const char ta = 'T', tb = 'N';
  const T one = 1, zero = 0;
  const BlasInt M{m}, N{n}, K{k}, LDA{lda}, LDB{ldb}, LDC{ldc};
  fn(&ta, &tb, M.ptr(), N.ptr(), K.ptr(), &one, a, LDA.ptr(), b, LDB.ptr(), &zero, c, LDC.ptr());
}

// A found gemm must get a small product with padded leading dimensions right before it is trusted: another calling
// convention would corrupt memory later.
template <class T>
bool computes_correctly(GemmFn<T> fn) {
  const T a[] = {1, 2, 3, -1, 4, 5, 6, -1};  // A (3 x 2) = [[1, 4], [2, 5], [3, 6]], column stride 4
  const T b[] = {1, 0, 1, -1, 0, 1, 0, -1};  // B (3 x 2) = [[1, 0], [0, 1], [1, 0]], column stride 4
  T c[] = {7, 7, 7, 7, 7, 7};                // C = A^T B (2 x 2), column stride 3
  call_tn(fn, 2, 2, 3, a, 4, b, 4, c, 3);
  const T expected[] = {4, 10, 7, 2, 5, 7};
  return std::equal(c, c + 6, expected);
}

template <class T>
GemmFn<T> find_gemm(const char* name) {
  auto found = reinterpret_cast<GemmFn<T>>(dlsym(RTLD_DEFAULT, name));
  return found && computes_correctly(found) ? found : nullptr;
}

template <class T>
bool gemm_tn(GemmFn<T> fn, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb, T* c,
             int64_t ldc) {
  if (!fn) return false;
  if (m == 0 || n == 0) return true;
  if (k == 0) {
    for (int64_t j = 0; j < n; ++j) std::fill(c + j * ldc, c + j * ldc + m, T(0));
    return true;
  }
  call_tn(fn, m, n, k, a, lda, b, ldb, c, ldc);
  return true;
}

}  // namespace

bool blas_gemm_tn(int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b, int64_t ldb,
                  double* c, int64_t ldc) {
  static const GemmFn<double> fn = find_gemm<double>("dgemm_");
  return gemm_tn(fn, m, n, k, a, lda, b, ldb, c, ldc);
}

bool blas_gemm_tn(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                  int64_t ldc) {
  static const GemmFn<float> fn = find_gemm<float>("sgemm_");
  return gemm_tn(fn, m, n, k, a, lda, b, ldb, c, ldc);
}

}  // namespace spread
