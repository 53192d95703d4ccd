#pragma once
// The bookkeeping of the root-free QL iteration (tridiagonal.h) around its sweeps: scaling, deflation of converged
// rows and 2 x 2 blocks, the shift and the iteration budget. Shared by the one-matrix solver (tridiagonal.cpp) and
// the lane solver (tridiagonal_lanes.cpp), which store a matrix's entries contiguously and one lane of
// interleaved matrices respectively, hence the strided view.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

namespace spread::ql {

constexpr double kEps = std::numeric_limits<double>::epsilon();
constexpr double kEps2 = kEps * kEps;

// Element i at p[i * Stride] (a constant: a stride read from memory was reloaded at every access, since the writes
// through p may alias it, and cost a quarter of the lanes' bookkeeping).
template <int64_t Stride>
struct Strided {
  double* p = nullptr;
  double& operator[](int64_t i) const { return p[i * Stride]; }
};

// Eigenvalues of [[a, b], [b, c]]: the one of larger magnitude from the trace, the other from the determinant
// divided by it, which does not cancel.
inline void eigenvalues_2x2(double a, double b, double c, double& first, double& second) {
  const double sum = a + c, root = std::hypot(a - c, 2.0 * b);
  const double big = sum >= 0 ? 0.5 * (sum + root) : 0.5 * (sum - root);
  if (big == 0) {  // a = b = c = 0
    first = second = 0;
    return;
  }
  const double larger = std::abs(a) > std::abs(c) ? a : c, smaller = std::abs(a) > std::abs(c) ? c : a;
  first = big;
  second = (larger / big) * smaller - (b / big) * b;
}

// Wilkinson's shift from the top 2 x 2 of the unreduced block starting at row l (off-diagonals squared in e2).
// Takes d[l], d[l + 1] and e2[l]; the lane solver computes it for all lanes at once with the same formula.
inline double shift_of(double d_l, double d_next, double e2_l) {
  const double root_e = std::sqrt(e2_l);
  const double g = (d_next - d_l) / (2.0 * root_e);
  // sqrt(g^2 + 1), not hypot (a tenth of the solver's time): where g^2 overflows the shift is d[l], its limit.
  return d_l - root_e / (g + std::copysign(std::sqrt(g * g + 1.0), g));
}

// One QL sweep to run: rows [l, m], from row m - 1 up to row l, with the shift of rows l and l + 1 (shift_of).
struct SweepRange {
  int64_t l = 0, m = -1;
};

// One matrix on its way through QL: rows before `l` have converged; [l, end] is the current unreduced block.
template <int64_t Stride>
struct Problem {
  Strided<Stride> d, e2;  // e2: squared off-diagonals
  // Optional (the lane solver): reduced[i] = 1 where row i's test below fails, else 0, kept current by whoever
  // changes d or e2. Reading a flag is cheaper than the test, and the scans for splits were most of the bookkeeping.
  Strided<Stride> reduced;
  bool* converged = nullptr;
  int64_t n = 0, l = 0, end = -1, budget = 0;
  double up = 1;  // the power of two that undoes the scaling

  bool unreduced_by_value(int64_t i) const { return e2[i] > kEps2 * std::abs(d[i] * d[i + 1]); }
  bool unreduced(int64_t i) const { return reduced.p ? reduced[i] == 0 : unreduced_by_value(i); }

  // Deflates converged rows and 2 x 2 blocks up to the next sweep, which it writes to *sweep; false when the matrix
  // is done (*converged says whether it converged).
  bool next_sweep(SweepRange* sweep) {
    for (;;) {
      if (l > end) {  // the next unreduced block; QL converges from the top, so it starts at the smaller end
        if (l >= n) return false;
        end = l;
        while (end + 1 < n && unreduced(end)) ++end;
        if (std::abs(d[end]) < std::abs(d[l])) reverse_block();
        continue;
      }
      int64_t m = l;
      while (m < end && unreduced(m)) ++m;
      if (m < end) {
        e2[m] = 0;
        if (reduced.p) reduced[m] = 1;
      }
      if (m == l) {
        ++l;
      } else if (m == l + 1) {
        eigenvalues_2x2(d[l], std::sqrt(e2[l]), d[l + 1], d[l], d[l + 1]);
        e2[l] = 0;
        l += 2;
      } else {
        if (budget-- == 0) {
          *converged = false;
          return false;
        }
        *sweep = {l, m};
        return true;
      }
    }
  }

  // Rows [l, end] in reverse order (the same eigenvalues).
  void reverse_block() {
    for (int64_t a = l, b = end; a < b; ++a, --b) std::swap(d[a], d[b]);
    for (int64_t a = l, b = end - 1; a < b; ++a, --b) std::swap(e2[a], e2[b]);
    if (reduced.p)
      for (int64_t i = l; i < end; ++i) reduced[i] = unreduced_by_value(i) ? 0.0 : 1.0;
  }

  // Undoes the scaling of a converged matrix.
  void finish() const {
    if (*converged)
      for (int64_t i = 0; i < n; ++i) d[i] *= up;
  }
};

// Checks, scales (by a power of two, exact, into [0.5, 1), so that the squares neither overflow nor underflow) and
// squares the off-diagonals of the n x n matrix with diagonal `diag` and off-diagonal `off`, into *p. Sets
// *converged; false when there is nothing to iterate (n <= 1, all zero, or not finite).
template <int64_t Stride>
bool start_problem(Strided<Stride> diag, Strided<Stride> off, int64_t n, bool* converged, Problem<Stride>* p) {
  *converged = true;
  *p = Problem<Stride>{};
  p->converged = converged;
  double largest = 0;
  for (int64_t i = 0; i < 2 * n - 1; ++i) {
    const double v = i < n ? diag[i] : off[i - n];
    if (!std::isfinite(v)) {
      *converged = false;
      return false;
    }
    largest = std::max(largest, std::abs(v));
  }
  if (n <= 1 || largest == 0) return false;
  int exponent = 0;
  std::frexp(largest, &exponent);
  const double down = std::ldexp(1.0, -exponent);
  for (int64_t i = 0; i < n; ++i) diag[i] *= down;
  for (int64_t i = 0; i + 1 < n; ++i) off[i] = (off[i] * down) * (off[i] * down);
  p->d = diag;
  p->e2 = off;
  p->n = n;
  p->budget = 30 * n;
  p->up = std::ldexp(1.0, exponent);
  return true;
}

}  // namespace spread::ql
