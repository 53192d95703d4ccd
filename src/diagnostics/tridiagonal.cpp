// Root-free QL for the eigenvalues of a symmetric tridiagonal matrix (tridiagonal.h says why this one).
#include "spread/diagnostics/tridiagonal.h"

#include "spread/runtime/vectorize.h"

#include "ql_control.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace spread {
namespace {

// One implicit QL sweep with shift sigma over rows [l, m], a step at a time so that two sweeps of independent
// matrices can run side by side: each step waits on a division, and a second chain fills that wait. In the textbook
// form each step divides by r and then by c; here c = p / r and p' = gamma^2 / c = w^2 / (r p) use 1/r and 1/p,
// which do not wait on each other.
struct Sweep {
  double* d;
  double* e2;
  int64_t l, m, i;  // rows [l, m], next step at row i (down to l)
  double sigma, c, s, gamma, p;

  Sweep() : d(nullptr), e2(nullptr), l(0), m(0), i(-1), sigma(0), c(1), s(0), gamma(0), p(0) {}
  Sweep(double* d_, double* e2_, const ql::SweepRange& r)
      : d(d_), e2(e2_), l(r.l), m(r.m), i(r.m - 1), sigma(ql::shift_of(d_[r.l], d_[r.l + 1], e2_[r.l])), c(1), s(0) {
    gamma = d[m] - sigma;
    p = gamma * gamma;
  }
  bool running() const { return i >= l; }
  void step() {
    const double bb = e2[i], r = p + bb;  // r > 0: bb > 0 inside an unreduced block, p >= 0
    if (i != m - 1) e2[i + 1] = s * r;
    const double alpha = d[i], previous_gamma = gamma, previous_c = c;
    const double inv_r = 1.0 / r, inv_p = 1.0 / p;
    const double w = p * (alpha - sigma) - bb * previous_gamma;
    c = p * inv_r;
    s = bb * inv_r;
    gamma = w * inv_r;
    d[i + 1] = previous_gamma + (alpha - gamma);
    p = p != 0 ? (inv_r * inv_p) * (w * w) : previous_c * bb;
    --i;
  }
  void finish() {
    e2[l] = s * p;
    d[l] = sigma + gamma;
  }
};

// A slot holds one matrix and its pending sweep; load() moves on to the next matrix that needs a sweep.
struct Slot {
  ql::Problem<1> problem;
  Sweep sweep;
  bool active = false;

  void load(TridiagonalProblem* problems, size_t count, size_t& next) {
    active = false;
    while (!active && next < count) {
      TridiagonalProblem& t = problems[next++];
      active = ql::start_problem<1>({t.diag}, {t.off}, t.n, &t.converged, &problem) && next_sweep();
    }
  }
  void advance(TridiagonalProblem* problems, size_t count, size_t& next) {
    sweep.finish();
    if (next_sweep()) return;
    load(problems, count, next);
  }
  // The problem's next sweep into `sweep`; when the problem is done, its scaling undone and false.
  bool next_sweep() {
    ql::SweepRange range;
    if (problem.next_sweep(&range)) {
      sweep = Sweep(problem.d.p, problem.e2.p, range);
      return true;
    }
    problem.finish();
    return false;
  }
};

// x . y with four partial sums (a single one would keep the loop waiting on each addition).
SPREAD_INLINE_INTO_CLONES double dot(const double* x, const double* y, int64_t m) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) {
    s0 += x[i] * y[i];
    s1 += x[i + 1] * y[i + 1];
    s2 += x[i + 2] * y[i + 2];
    s3 += x[i + 3] * y[i + 3];
  }
  for (; i < m; ++i) s0 += x[i] * y[i];
  return (s0 + s1) + (s2 + s3);
}

struct Reflector {
  double tau, beta;
};

// H = I - tau u u^T with u[0] = 1 and H x = beta e_1, for x of length m; u[0..m) is written.
SPREAD_INLINE_INTO_CLONES Reflector make_reflector(const double* x, int64_t m, double* u) {
  const double alpha = x[0], sigma = m > 1 ? dot(x + 1, x + 1, m - 1) : 0.0;
  u[0] = 1;
  if (sigma == 0) {  // already e_1-shaped: no reflection
    std::fill(u + 1, u + m, 0.0);
    return {0.0, alpha};
  }
  const double beta = -std::copysign(std::sqrt(alpha * alpha + sigma), alpha);
  const double scale = 1.0 / (alpha - beta);
  for (int64_t i = 1; i < m; ++i) u[i] = x[i] * scale;
  return {(beta - alpha) / beta, beta};
}

// p[r] = tau * sum_c a(r, c) u[c] over rows and columns [from, n).
SPREAD_INLINE_INTO_CLONES void scaled_product(const double* a, int64_t n, int64_t from, const double* u, double tau,
                                              double* p) {
  std::fill(p + from, p + n, 0.0);
  for (int64_t c = from; c < n; ++c) {
    const double uc = u[c] * tau;
    const double* col = a + c * n;
    for (int64_t r = from; r < n; ++r) p[r] += col[r] * uc;
  }
}

// G = M M^T (M k x t): rank-one updates of the lower triangle, four columns of M per pass over it.
SPREAD_INLINE_INTO_CLONES void outer_gram(const double* m, int64_t ld, int64_t k, int64_t t, double* g) {
  std::fill(g, g + k * k, 0.0);
  int64_t c = 0;
  for (; c + 4 <= t; c += 4) {
    const double *m0 = m + c * ld, *m1 = m0 + ld, *m2 = m1 + ld, *m3 = m2 + ld;
    for (int64_t j = 0; j < k; ++j) {
      const double a0 = m0[j], a1 = m1[j], a2 = m2[j], a3 = m3[j];
      double* gj = g + j * k;
      for (int64_t i = j; i < k; ++i) gj[i] += (m0[i] * a0 + m1[i] * a1) + (m2[i] * a2 + m3[i] * a3);
    }
  }
  for (; c < t; ++c) {
    const double* m0 = m + c * ld;
    for (int64_t j = 0; j < k; ++j) {
      const double a0 = m0[j];
      double* gj = g + j * k;
      for (int64_t i = j; i < k; ++i) gj[i] += m0[i] * a0;
    }
  }
}

// G = M^T M (M t x k): dot products of M's columns, four of them against one column per pass, lower triangle.
SPREAD_INLINE_INTO_CLONES void inner_gram(const double* m, int64_t ld, int64_t t, int64_t k, double* g) {
  for (int64_t j = 0; j < k; ++j) {
    const double* mj = m + j * ld;
    double* gj = g + j * k;
    int64_t i = j;
    for (; i + 4 <= k; i += 4) {
      const double *m0 = m + i * ld, *m1 = m0 + ld, *m2 = m1 + ld, *m3 = m2 + ld;
      double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
      for (int64_t r = 0; r < t; ++r) {
        s0 += m0[r] * mj[r];
        s1 += m1[r] * mj[r];
        s2 += m2[r] * mj[r];
        s3 += m3[r] * mj[r];
      }
      gj[i] = s0, gj[i + 1] = s1, gj[i + 2] = s2, gj[i + 3] = s3;
    }
    for (; i < k; ++i) {
      const double* mi = m + i * ld;
      double s0 = 0;
#pragma omp simd reduction(+ : s0)
      for (int64_t r = 0; r < t; ++r) s0 += mi[r] * mj[r];
      gj[i] = s0;
    }
  }
}

}  // namespace

SPREAD_VECTOR_CLONES void small_gram(const double* m, int64_t ld, int64_t rows, int64_t cols, double* g) {
  const int64_t k = std::min(rows, cols);
  if (rows <= cols) outer_gram(m, ld, rows, cols, g);
  else inner_gram(m, ld, rows, cols, g);
  for (int64_t j = 0; j < k; ++j)  // the upper triangle from the lower
    for (int64_t i = j + 1; i < k; ++i) g[i * k + j] = g[j * k + i];
}

// Step j reflects rows and columns [j + 1, n): with p = tau A u and w = p - (tau / 2)(p . u) u, the trailing square
// becomes A - u w^T - w u^T. Column j + 1 is updated first, since the next reflector comes from it; the rest of the
// square is then updated in the same pass that forms the next p.
SPREAD_VECTOR_CLONES void tridiagonalize_symmetric(double* a, int64_t n, double* diag, double* off, double* work) {
  if (n <= 0) return;
  auto at = [&](int64_t r, int64_t c) -> double& { return a[c * n + r]; };
  double *u = work, *next_u = work + n, *w = work + 2 * n, *p = work + 3 * n, *next_p = work + 4 * n;
  Reflector h{0.0, 0.0};
  if (n > 1) {
    h = make_reflector(&at(1, 0), n - 1, u + 1);
    scaled_product(a, n, 1, u, h.tau, p);
  }
  for (int64_t j = 0; j + 1 < n; ++j) {
    const int64_t s = j + 1;  // the trailing square is [s, n)
    diag[j] = at(j, j);
    off[j] = h.beta;
    const double k = -0.5 * h.tau * dot(p + s, u + s, n - s);
    for (int64_t r = s; r < n; ++r) w[r] = p[r] + k * u[r];
    double* first = &at(0, s);
    for (int64_t r = s; r < n; ++r) first[r] -= u[r] * w[s] + w[r] * u[s];
    if (s == n - 1) break;
    const Reflector next = make_reflector(&at(s + 1, s), n - 1 - s, next_u + s + 1);
    std::fill(next_p + s + 1, next_p + n, 0.0);
    for (int64_t c = s + 1; c < n; ++c) {
      const double wc = w[c], uc = u[c], next_uc = next_u[c] * next.tau;
      double* col = &at(0, c);
      for (int64_t r = s + 1; r < n; ++r) {
        const double x = col[r] - u[r] * wc - w[r] * uc;
        col[r] = x;
        next_p[r] += x * next_uc;
      }
    }
    std::swap(u, next_u);
    std::swap(p, next_p);
    h = next;
  }
  diag[n - 1] = at(n - 1, n - 1);
}

void tridiagonal_eigenvalues(TridiagonalProblem* problems, size_t count) {
  size_t next = 0;
  Slot a, b;
  a.load(problems, count, next);
  b.load(problems, count, next);
  while (a.active && b.active) {
    while (a.sweep.running() && b.sweep.running()) {
      a.sweep.step();
      b.sweep.step();
    }
    if (!a.sweep.running()) a.advance(problems, count, next);
    if (!b.sweep.running()) b.advance(problems, count, next);
  }
  for (Slot* slot : {&a, &b})  // the last matrix, alone
    while (slot->active) {
      while (slot->sweep.running()) slot->sweep.step();
      slot->advance(problems, count, next);
    }
}

bool tridiagonal_eigenvalues(double* diag, double* off, int64_t n) {
  TridiagonalProblem one{diag, off, n};
  tridiagonal_eigenvalues(&one, 1);
  return one.converged;
}

}  // namespace spread
