#pragma once
// SOCM's per-pair Gram matrices and their eigenvalues (tridiagonal.h's steps), kLanes matrices at a time: element
// i of every matrix sits in one vector of kLanes doubles, so each operation of the algorithm is one vector
// instruction across the matrices. One 24-64-wide matrix at a time leaves the vector units half idle on short loops
// and remainders; across matrices every loop is full width (bench_socm: 1.3-1.5x on the whole computation).
#include <cstddef>
#include <cstdint>
#include <vector>

namespace spread {

constexpr int kLanes = 8;

// One matrix of a batch: M (rows x cols, column-major, leading dimension ld).
struct LaneMatrix {
  const double* m = nullptr;
  int64_t ld = 0, rows = 0, cols = 0;
};

// Buffers that only grow, reused from batch to batch (one per thread).
struct LaneWork {
  std::vector<double> packed, gram, vectors, diag, off, reduced;
};

// For each of the kLanes matrices, the k = min(rows, cols) eigenvalues (in no particular order) of its Gram
// G = the smaller of M M^T and M^T M (as small_gram) into eigenvalues[l][0..k), by the steps of
// tridiagonalize_symmetric and tridiagonal_eigenvalues; converged[l] as there (false: the caller needs another
// solver for that matrix). Matrices of different sizes share a batch: the smaller ones are padded with zeros, which
// leaves their results exactly as alone (at the cost of the largest size), so a matrix's result depends neither on
// its lane nor on the other matrices of the batch. A lane may be empty (rows or cols 0).
void gram_eigenvalues(const LaneMatrix (&in)[kLanes], double* const (&eigenvalues)[kLanes],
                      bool (&converged)[kLanes], LaneWork& work);

}  // namespace spread
