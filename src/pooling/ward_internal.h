#pragma once
// Shared by ward.cpp (pooling, distances from a Gram matrix) and ward_linkage.cpp (the tree and its cuts).
#include <cstdint>
#include <numeric>
#include <vector>

#include "spread/pooling/ward.h"

namespace spread::ward_detail {

// W doubles (or int64s) as one vector (GCC and clang vector extension), written out where the auto-vectorizer
// will not go: minimum-with-index reductions and register-blocked products. Each kernel is a template on W,
// compiled for the running CPU's own width (8: AVX-512, 4: AVX2, 2: SSE2 and other architectures); a vector
// wider than the unit it is compiled for ran 5-35x slower than scalar code. `Unaligned` loads and stores through
// a double*: an accumulator copied out with memcpy has its address taken, and GCC then kept a whole block of
// accumulators in memory, storing them on every step.
template <int W>
struct Lanes {
  typedef double Double __attribute__((vector_size(8 * W)));
  typedef int64_t Int __attribute__((vector_size(8 * W)));
  typedef double Unaligned __attribute__((vector_size(8 * W), may_alias, aligned(1)));
};

enum class Simd { kAvx512, kAvx2, kBase };

// The widest vector unit of the running CPU among those the kernels are compiled for (GCC on x86-64; elsewhere
// kBase), detected once.
inline Simd simd() {
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
  static const Simd found = __builtin_cpu_supports("avx512f") ? Simd::kAvx512
                            : __builtin_cpu_supports("avx2")  ? Simd::kAvx2
                                                              : Simd::kBase;
  return found;
#else
  return Simd::kBase;
#endif
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define SPREAD_WARD_X86 1
#define SPREAD_TARGET_AVX512 __attribute__((target("avx512f")))
#define SPREAD_TARGET_AVX2 __attribute__((target("avx2")))
#endif

// scipy's linkage(D, 'ward') on an m x m distance matrix stored by rows `stride` apart (stride >= m), +inf on the
// diagonal, finite and >= 0 elsewhere (m >= 2). Works in place: the matrix is overwritten.
WardLinkage linkage_in_place(double* d, int64_t m, int64_t stride);

// Labels 0 .. m - 1: every row its own cluster (no merge).
inline std::vector<int64_t> singletons(int64_t m) {
  std::vector<int64_t> labels(static_cast<size_t>(m));
  std::iota(labels.begin(), labels.end(), int64_t(0));
  return labels;
}

}  // namespace spread::ward_detail
