#pragma once
// Shared by ward.cpp (pooling, distances from a Gram matrix) and ward_linkage.cpp (the tree and its cuts).
#include <cstdint>
#include <numeric>
#include <vector>

#include "spread/pooling/ward.h"

namespace spread::ward_detail {

// Eight doubles (GCC and clang vector extension): one AVX-512 register in the AVX-512 clone of a
// SPREAD_VECTOR_CLONES function, two or four narrower ones in the others. Written out where the auto-vectorizer
// will not go: floating-point minimum and sum reductions (not reassociable without -ffast-math) and register
// blocking.
typedef double Vec8 __attribute__((vector_size(64)));
// The same for unaligned loads and stores through a double*: an accumulator copied out with memcpy has its address
// taken, and GCC then kept a whole block of accumulators in memory, storing them on every step.
typedef double Vec8Unaligned __attribute__((vector_size(64), may_alias, aligned(1)));

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
