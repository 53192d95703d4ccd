#include "spread/runtime/gemm.h"

#include <dlfcn.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace spread {
namespace {

template <class T>
using GemmFn = void (*)(const char*, const char*, const int*, const int*, const int*, const T*, const T*, const int*,
                        const T*, const int*, const T*, T*, const int*);

// BLAS integers are passed as zero-extended 64-bit slots: a little-endian LP64 BLAS reads their low 4 bytes, an
// ILP64 one all 8, and both see the same value.
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

GemmFn<float> found_sgemm() {
  static const GemmFn<float> fn = find_gemm<float>("sgemm_");
  return fn;
}

// The row-major product's check: C = A B^T with row strides larger than the rows (A = [[1, 3, 5], [2, 4, 6]],
// B^T stored as [[1, 2, 3], [4, 5, 6]]), the padding left alone. Small integers, so that a bf16 product is exact.
template <class Product>
bool computes_small_row_major_product(Product product) {
  const float a[] = {1, 3, 5, -1, 2, 4, 6, -1};
  const float b[] = {1, 2, 3, -1, 4, 5, 6, -1};
  float c[] = {7, 7, 7, 7, 7, 7};
  product(a, b, c);  // as (false, true, m 2, n 2, k 3, alpha 1, a, lda 4, b, ldb 4, beta 0, c, ldc 3)
  const float expected[] = {22, 49, 7, 28, 64, 7};
  return std::equal(c, c + 6, expected);
}

using DnnlSgemm = int (*)(char, char, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t,
                         float, float*, int64_t);

void check_dnnl_status(int status, const char* name, int64_t m, int64_t n, int64_t k) {
  if (status != 0)  // 0 = dnnl_success; C is left as it was
    throw std::runtime_error(std::string(name) + " failed with status " + std::to_string(status) + " on " +
                             std::to_string(m) + " x " + std::to_string(n) + " x " + std::to_string(k));
}

DnnlSgemm found_onednn_sgemm() {
  static const DnnlSgemm fn = [] {
    auto found = reinterpret_cast<DnnlSgemm>(dlsym(RTLD_DEFAULT, "dnnl_sgemm"));
    const bool works = found && computes_small_row_major_product([found](const float* a, const float* b, float* c) {
                         found('N', 'T', 2, 2, 3, 1.0f, a, 4, b, 4, 0.0f, c, 3);
                       });
    return works ? found : nullptr;
  }();
  return fn;
}

struct Bf16Gemm {
  using Dnnl = int (*)(char, char, int64_t, int64_t, int64_t, float, const Bf16*, int64_t, const Bf16*, int64_t, float,
                       float*, int64_t);
  using Cblas = void (*)(int, int, int, int, int, int, float, const Bf16*, int, const Bf16*, int, float, float*, int);
  Dnnl dnnl = nullptr;
  Cblas cblas = nullptr;

  void operator()(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const Bf16* a,
                  int64_t lda, const Bf16* b, int64_t ldb, float beta, float* c, int64_t ldc) const {
    if (dnnl) {
      const int status = dnnl(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      check_dnnl_status(status, "dnnl_gemm_bf16bf16f32", m, n, k);
      return;
    }
    constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;  // CBLAS_LAYOUT, CBLAS_TRANSPOSE
    cblas(kRowMajor, trans_a ? kTrans : kNoTrans, trans_b ? kTrans : kNoTrans, int(m), int(n), int(k), alpha, a,
          int(lda), b, int(ldb), beta, c, int(ldc));
  }

  bool computes_correctly() const {
    try {
      return computes_small_row_major_product([this](const float* a32, const float* b32, float* c) {
        Bf16 a[8], b[8];
        std::transform(a32, a32 + 8, a, to_bf16);
        std::transform(b32, b32 + 8, b, to_bf16);
        (*this)(false, true, 2, 2, 3, 1.0f, a, 4, b, 4, 0.0f, c, 3);
      });
    } catch (const std::exception&) {  // oneDNN without a bf16 kernel for this CPU: dnnl_unimplemented
      return false;
    }
  }
  explicit operator bool() const { return dnnl || cblas; }
};

const Bf16Gemm& found_bf16_gemm() {
  static const Bf16Gemm found = [] {
    Bf16Gemm dnnl, cblas;
    dnnl.dnnl = reinterpret_cast<Bf16Gemm::Dnnl>(dlsym(RTLD_DEFAULT, "dnnl_gemm_bf16bf16f32"));
    if (dnnl && dnnl.computes_correctly()) return dnnl;
    cblas.cblas = reinterpret_cast<Bf16Gemm::Cblas>(dlsym(RTLD_DEFAULT, "cblas_gemm_bf16bf16f32"));
    if (cblas && cblas.computes_correctly()) return cblas;
    return Bf16Gemm{};
  }();
  return found;
}

}  // namespace

bool blas_gemm_tn(int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b, int64_t ldb,
                  double* c, int64_t ldc) {
  static const GemmFn<double> fn = find_gemm<double>("dgemm_");
  return gemm_tn(fn, m, n, k, a, lda, b, ldb, c, ldc);
}

bool blas_gemm_tn(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                  int64_t ldc) {
  return gemm_tn(found_sgemm(), m, n, k, a, lda, b, ldb, c, ldc);
}

bool has_sgemm() { return found_sgemm() != nullptr; }

void row_major_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                    int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  // Row-major C[m x n] = alpha op(A) op(B) + beta C is, in BLAS's column-major view of the same memory,
  // C^T = op(B)^T op(A)^T.
  const char ta = trans_a ? 'T' : 'N', tb = trans_b ? 'T' : 'N';
  const BlasInt M{m}, N{n}, K{k}, LDA{lda}, LDB{ldb}, LDC{ldc};
  found_sgemm()(&tb, &ta, N.ptr(), M.ptr(), K.ptr(), &alpha, b, LDB.ptr(), a, LDA.ptr(), &beta, c, LDC.ptr());
}

bool has_onednn_sgemm() { return found_onednn_sgemm() != nullptr; }

void onednn_row_major_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                            int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const int status = found_onednn_sgemm()(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb,
                                          beta, c, ldc);
  check_dnnl_status(status, "dnnl_sgemm", m, n, k);
}

bool has_bf16_gemm() { return bool(found_bf16_gemm()); }

void row_major_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const Bf16* a,
                    int64_t lda, const Bf16* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  found_bf16_gemm()(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace spread
