// Gram eigenvalues of kLanes matrices side by side (tridiagonal_lanes.h says why).
#include "spread/diagnostics/tridiagonal_lanes.h"

#include "spread/runtime/vectorize.h"

#include "ql_control.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace spread {
namespace {

// kLanes doubles, one per matrix. GCC and Clang lower the operators to the widest vectors of the clone's target
// (one AVX-512 register, two AVX2 ones, four SSE2 ones).
// may_alias: the vectors live in std::vector<double> buffers, and the QL bookkeeping reads one lane as doubles.
typedef double Vec __attribute__((vector_size(kLanes * sizeof(double)), may_alias));
constexpr int64_t kTile = 4;  // Gram tiles of 4 x 4 vectors: 16 accumulators, 8 loads per 16 products

// `count` vectors from `buffer`, aligned to a vector (the buffer grows as needed and is not cleared).
Vec* vectors_in(std::vector<double>& buffer, size_t count) {
  const size_t need = count * kLanes + kLanes;
  if (buffer.size() < need) buffer.resize(need);
  const auto address = reinterpret_cast<uintptr_t>(buffer.data());
  const uintptr_t aligned = (address + sizeof(Vec) - 1) / sizeof(Vec) * sizeof(Vec);
  return reinterpret_cast<Vec*>(aligned);
}

SPREAD_INLINE_INTO_CLONES Vec load(const double* x) {
  Vec v;
  std::memcpy(&v, x, sizeof v);
  return v;
}

int64_t round_up(int64_t n, int64_t to) { return (n + to - 1) / to * to; }

// The Gram's inner length for one matrix: its longer side.
int64_t inner_length(const LaneMatrix& x) { return std::max(x.rows, x.cols); }

// The Gram's size for one matrix.
int64_t gram_size(const LaneMatrix& x) { return std::min(x.rows, x.cols); }

// packed[c * kp + i][l] = A_l(i, c), where G_l = A_l A_l^T: A = M when rows <= cols, M^T otherwise. Zero past each
// matrix's inner length and its own size (up to kp), so that every lane runs the same loops. Column by column, so
// that the lanes' stores land in the same few cache lines: lane by lane through the whole buffer cost as much as
// the Gram.
void pack_lanes(const LaneMatrix (&in)[kLanes], int64_t kp, int64_t inner, Vec* packed) {
  for (int64_t c = 0; c < inner; ++c) {
    Vec* column = packed + c * kp;
    std::memset(static_cast<void*>(column), 0, size_t(kp) * sizeof(Vec));
    double* lanes = reinterpret_cast<double*>(column);
    for (int l = 0; l < kLanes; ++l) {
      const LaneMatrix& x = in[l];
      if (c >= inner_length(x)) continue;
      const int64_t rows = gram_size(x);
      if (x.rows <= x.cols) {
        for (int64_t i = 0; i < rows; ++i) lanes[i * kLanes + l] = x.m[c * x.ld + i];
      } else {
        for (int64_t i = 0; i < rows; ++i) lanes[i * kLanes + l] = x.m[c + i * x.ld];
      }
    }
  }
}

// g (k x k, column-major, both triangles) = A A^T per lane, from the packed A (kp x inner), one 4 x 4 tile of the
// lower triangle at a time.
SPREAD_VECTOR_CLONES void gram_of_packed(const Vec* packed, int64_t k, int64_t kp, int64_t inner, Vec* g) {
  for (int64_t j0 = 0; j0 < kp; j0 += kTile)
    for (int64_t i0 = j0; i0 < kp; i0 += kTile) {
      Vec acc[kTile][kTile] = {};
      for (int64_t c = 0; c < inner; ++c) {
        const Vec* column = packed + c * kp;
#pragma GCC unroll 4
        for (int64_t a = 0; a < kTile; ++a)
#pragma GCC unroll 4
          for (int64_t b = 0; b < kTile; ++b) acc[a][b] += column[i0 + a] * column[j0 + b];
      }
      for (int64_t a = 0; a < kTile; ++a)
        for (int64_t b = 0; b < kTile; ++b) {
          const int64_t r = i0 + a, c = j0 + b;
          if (r < k && c < k) g[c * k + r] = g[r * k + c] = acc[a][b];
        }
    }
}

// x . y per lane, with four partial sums, element i always into sum i mod 4: zeros appended to x and y (a lane
// padded to the batch's size) then leave every sum, and so the result, exactly as without them.
SPREAD_INLINE_INTO_CLONES Vec dot(const Vec* x, const Vec* y, int64_t m) {
  Vec sum[4] = {};
  int64_t i = 0;
  for (; i + 4 <= m; i += 4)
    for (int64_t j = 0; j < 4; ++j) sum[j] += x[i + j] * y[i + j];
  for (int64_t j = 0; i + j < m; ++j) sum[j] += x[i + j] * y[i + j];
  return (sum[0] + sum[1]) + (sum[2] + sum[3]);
}

struct Reflector {
  Vec tau, beta;
};

// Per lane, H = I - tau u u^T with u[0] = 1 and H x = beta e_1 (x of length m); a lane whose x is already
// e_1-shaped gets tau = 0 and u = e_1, as in tridiagonal.cpp.
SPREAD_INLINE_INTO_CLONES Reflector make_reflector(const Vec* x, int64_t m, Vec* u) {
  const Vec alpha = x[0], sigma = m > 1 ? dot(x + 1, x + 1, m - 1) : Vec{};
  Reflector h;
  Vec scale;
  for (int l = 0; l < kLanes; ++l) {
    if (sigma[l] == 0) {
      h.tau[l] = 0, h.beta[l] = alpha[l], scale[l] = 0;
      continue;
    }
    const double beta = -std::copysign(std::sqrt(alpha[l] * alpha[l] + sigma[l]), alpha[l]);
    h.tau[l] = (beta - alpha[l]) / beta, h.beta[l] = beta, scale[l] = 1.0 / (alpha[l] - beta);
  }
  u[0] = Vec{} + 1.0;
  for (int64_t i = 1; i < m; ++i) u[i] = x[i] * scale;
  return h;
}

// p[r] = tau * sum_c a(r, c) u[c] over rows and columns [from, n).
SPREAD_INLINE_INTO_CLONES void scaled_product(const Vec* a, int64_t n, int64_t from, const Vec* u, Vec tau, Vec* p) {
  for (int64_t r = from; r < n; ++r) p[r] = Vec{};
  for (int64_t c = from; c < n; ++c) {
    const Vec uc = u[c] * tau;
    const Vec* col = a + c * n;
    for (int64_t r = from; r < n; ++r) p[r] += col[r] * uc;
  }
}

// tridiagonalize_symmetric (tridiagonal.cpp, which explains the steps), each scalar a vector of lanes, on the lower
// triangle only: the upper one is read once, for the first product, and is stale after. Each entry below the
// diagonal then serves both products it enters, and the triangle (half the memory) fits a 48 KiB L1 cache up to
// n = 38 where the square did up to n = 27 (measured: about 1.5x faster than the square, timed against the QL
// sweeps of the same batches). A lane padded with zero rows and columns stays zero there (its reflectors there are
// the identity), so it is reduced exactly as it would be alone.
SPREAD_VECTOR_CLONES void tridiagonalize_lanes(Vec* a, int64_t n, Vec* diag, Vec* off, Vec* work) {
  auto at = [&](int64_t r, int64_t c) -> Vec& { return a[c * n + r]; };
  Vec *u = work, *next_u = work + n, *w = work + 2 * n, *p = work + 3 * n, *next_p = work + 4 * n;
  Reflector h{Vec{}, Vec{}};
  if (n > 1) {
    h = make_reflector(&at(1, 0), n - 1, u + 1);
    scaled_product(a, n, 1, u, h.tau, p);
  }
  for (int64_t j = 0; j + 1 < n; ++j) {
    const int64_t s = j + 1;
    diag[j] = at(j, j);
    off[j] = h.beta;
    const Vec k = -0.5 * h.tau * dot(p + s, u + s, n - s);
    for (int64_t r = s; r < n; ++r) w[r] = p[r] + k * u[r];
    Vec* first = &at(0, s);
    for (int64_t r = s; r < n; ++r) first[r] -= u[r] * w[s] + w[r] * u[s];
    if (s == n - 1) break;
    const Reflector next = make_reflector(&at(s + 1, s), n - 1 - s, next_u + s + 1);
    for (int64_t r = s + 1; r < n; ++r) next_p[r] = Vec{};
    for (int64_t c = s + 1; c < n; ++c) {
      const Vec wc = w[c], uc = u[c], next_uc = next_u[c] * next.tau;
      Vec* col = &at(0, c);
      Vec x = col[c] - u[c] * wc - w[c] * uc, along = x * next_u[c];  // along: column c's share of next_p[c]
      col[c] = x;
      for (int64_t r = c + 1; r < n; ++r) {
        x = col[r] - u[r] * wc - w[r] * uc;
        col[r] = x;
        next_p[r] += x * next_uc;
        along += x * next_u[r];
      }
      next_p[c] += along * next.tau;
    }
    std::swap(u, next_u);
    std::swap(p, next_p);
    h = next;
  }
  diag[n - 1] = at(n - 1, n - 1);
}

// ql::shift_of in every lane.
SPREAD_INLINE_INTO_CLONES Vec shifts(Vec d_l, Vec d_next, Vec e2_l) {
  Vec root_e;
  for (int l = 0; l < kLanes; ++l) root_e[l] = std::sqrt(e2_l[l]);
  const Vec g = (d_next - d_l) / (2.0 * root_e);
  Vec root_g;
  for (int l = 0; l < kLanes; ++l) root_g[l] = std::copysign(std::sqrt(g[l] * g[l] + 1.0), g[l]);
  return d_l - root_e / (g + root_g);
}

// reduced[i] per lane: 1 where row i splits the matrix (ql::Problem::unreduced_by_value is false), else 0.
SPREAD_INLINE_INTO_CLONES Vec reduced_flag(Vec e2_i, Vec d_i, Vec d_next) {
  const Vec product = d_i * d_next, bound = ql::kEps2 * (product < 0 ? -product : product);
  return e2_i > bound ? Vec{} : Vec{} + 1.0;
}

// reduced_flag for rows [0, n - 1).
SPREAD_VECTOR_CLONES void flag_rows(const Vec* d, const Vec* e2, int64_t n, Vec* reduced) {
  for (int64_t i = 0; i + 1 < n; ++i) reduced[i] = reduced_flag(e2[i], d[i], d[i + 1]);
}

// One QL sweep (tridiagonal.cpp's Sweep, which explains the step) in every lane that has one, in lockstep: row i
// runs from the largest m - 1 down to the smallest l, and a lane takes part in the steps of its own rows [l, m - 1]
// only (a lane without a sweep has m = -1). Lanes' blocks differ by a few rows, so little work is masked away.
SPREAD_VECTOR_CLONES void sweep_lanes(Vec* d, Vec* e2, Vec* reduced, const ql::SweepRange (&range)[kLanes]) {
  // Filled as arrays and loaded whole: vectors filled a lane at a time were split into scalars by GCC, and with
  // them the whole loop.
  alignas(sizeof(Vec)) double first_row[kLanes], last_row[kLanes], d_l[kLanes], d_next[kLanes], e2_l[kLanes],
      d_m[kLanes];
  int64_t top = -1, bottom = INT64_MAX;
  for (int l = 0; l < kLanes; ++l) {
    const ql::SweepRange& r = range[l];
    const bool sweeps = r.m > r.l;
    first_row[l] = double(r.l), last_row[l] = double(r.m - 1);
    // A lane without a sweep gets finite stand-ins (shift -1, gamma 2); its values are never kept.
    d_l[l] = sweeps ? d[r.l][l] : 0.0, d_next[l] = sweeps ? d[r.l + 1][l] : 0.0;
    e2_l[l] = sweeps ? e2[r.l][l] : 1.0, d_m[l] = sweeps ? d[r.m][l] : 1.0;
    if (sweeps) top = std::max(top, r.m - 1), bottom = std::min(bottom, r.l);
  }
  const Vec first = load(first_row), last = load(last_row), sigma = shifts(load(d_l), load(d_next), load(e2_l));
  Vec gamma = load(d_m) - sigma, p = gamma * gamma, c = Vec{} + 1.0, s = {};
  // Lane masks from single compares used in place (cond ? a : b): GCC 12 scalarized the AND of two compares and
  // selects through a stored mask in these clones, and with them the whole loop.
  for (int64_t i = top; i >= bottom; --i) {
    const Vec row = Vec{} + double(i), below = row - first, above = last - row, above_next = above - 1.0;
    const Vec active = below < above ? below : above;                  // >= 0: l <= i <= m - 1
    const Vec inside = below < above_next ? below : above_next;        // >= 0: l <= i < m - 1
    const Vec bb = e2[i], r = p + bb, alpha = d[i];
    e2[i + 1] = inside >= 0 ? s * r : e2[i + 1];
    const Vec inv_r = 1.0 / r, inv_p = 1.0 / p;
    const Vec w = p * (alpha - sigma) - bb * gamma;
    const Vec next_gamma = w * inv_r;
    d[i + 1] = active >= 0 ? gamma + (alpha - next_gamma) : d[i + 1];
    // Row i + 1 is final for this sweep (d[i + 2] came a step earlier): its flag for the next scan.
    reduced[i + 1] = inside >= 0 ? reduced_flag(e2[i + 1], d[i + 1], d[i + 2]) : reduced[i + 1];
    const Vec next_p = p != 0 ? (inv_r * inv_p) * (w * w) : c * bb;
    c = active >= 0 ? p * inv_r : c;
    s = active >= 0 ? bb * inv_r : s;
    gamma = active >= 0 ? next_gamma : gamma;
    p = active >= 0 ? next_p : p;
  }
  for (int l = 0; l < kLanes; ++l) {
    const int64_t row = range[l].l;
    if (range[l].m <= row) continue;
    e2[row][l] = s[l] * p[l];
    d[row][l] = sigma[l] + gamma[l];
    reduced[row][l] = e2[row][l] > ql::kEps2 * std::abs(d[row][l] * d[row + 1][l]) ? 0.0 : 1.0;
  }
}

// The eigenvalues of each lane's tridiagonal matrix (diagonal d, off-diagonal e, n[l] rows) into d, as
// tridiagonal_eigenvalues does for one matrix: each lane's own bookkeeping between sweeps, the sweeps side by side.
void eigenvalues_lanes(Vec* d, Vec* e, const int64_t (&n)[kLanes], bool (&converged)[kLanes], Vec* reduced) {
  ql::Problem<kLanes> problems[kLanes];
  bool running[kLanes];
  int64_t rows = 0;
  for (int l = 0; l < kLanes; ++l) {
    const ql::Strided<kLanes> diag{reinterpret_cast<double*>(d) + l}, off{reinterpret_cast<double*>(e) + l};
    running[l] = ql::start_problem(diag, off, n[l], &converged[l], &problems[l]);
    problems[l].reduced = {reinterpret_cast<double*>(reduced) + l};
    rows = std::max(rows, n[l]);
  }
  flag_rows(d, e, rows, reduced);
  for (;;) {
    ql::SweepRange range[kLanes];
    bool any = false;
    for (int l = 0; l < kLanes; ++l) {
      if (!running[l]) continue;
      if (problems[l].next_sweep(&range[l])) {
        any = true;
      } else {
        problems[l].finish();
        running[l] = false;
      }
    }
    if (!any) return;
    sweep_lanes(d, e, reduced, range);
  }
}

}  // namespace

void gram_eigenvalues(const LaneMatrix (&in)[kLanes], double* const (&eigenvalues)[kLanes],
                      bool (&converged)[kLanes], LaneWork& work) {
  int64_t inner = 0, n = 0, size[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    size[l] = gram_size(in[l]);
    inner = std::max(inner, inner_length(in[l]));
    n = std::max(n, size[l]);
    converged[l] = true;
  }
  if (n == 0) return;
  const int64_t kp = round_up(n, kTile);
  Vec* packed = vectors_in(work.packed, size_t(inner * kp));
  Vec* gram = vectors_in(work.gram, size_t(n * n));
  Vec* vectors = vectors_in(work.vectors, size_t(5 * n));
  Vec* d = vectors_in(work.diag, size_t(n));
  Vec* e = vectors_in(work.off, size_t(n));
  Vec* reduced = vectors_in(work.reduced, size_t(n));
  pack_lanes(in, kp, inner, packed);
  gram_of_packed(packed, n, kp, inner, gram);
  tridiagonalize_lanes(gram, n, d, e, vectors);
  eigenvalues_lanes(d, e, size, converged, reduced);
  for (int l = 0; l < kLanes; ++l)
    for (int64_t i = 0; i < size[l]; ++i) eigenvalues[l][i] = d[i][l];
}

}  // namespace spread
