// Root-free QL for the eigenvalues of a symmetric tridiagonal matrix (tridiagonal.h says why this one).
#include "spread/diagnostics/tridiagonal.h"

#include "spread/runtime/vectorize.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace spread {
namespace {

constexpr double kEps = std::numeric_limits<double>::epsilon();
constexpr double kEps2 = kEps * kEps;

// Eigenvalues of [[a, b], [b, c]]: the one of larger magnitude from the trace, the other from the determinant
// divided by it, which does not cancel.
void eigenvalues_2x2(double a, double b, double c, double& first, double& second) {
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
double shift_at(const double* d, const double* e2, int64_t l) {
  const double root_e = std::sqrt(e2[l]);
  const double g = (d[l + 1] - d[l]) / (2.0 * root_e);
  // sqrt(g^2 + 1), not hypot (a tenth of the solver's time): where g^2 overflows the shift is d[l], its limit.
  return d[l] - root_e / (g + std::copysign(std::sqrt(g * g + 1.0), g));
}

// One implicit QL sweep with shift sigma over rows [l, m]. In the textbook form each step divides by r and then
// by c; here c = p / r and p' = gamma^2 / c = w^2 / (r p) use 1/r and 1/p, which do not wait on each other.
void ql_sweep(double* d, double* e2, int64_t l, int64_t m, double sigma) {
  double c = 1, s = 0, gamma = d[m] - sigma, p = gamma * gamma;
  for (int64_t i = m - 1; i >= l; --i) {
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
  }
  e2[l] = s * p;
  d[l] = sigma + gamma;
}

// All eigenvalues of the n x n block (squared off-diagonals in e2), deflating at the top; `budget` counts sweeps.
bool ql_block(double* d, double* e2, int64_t n, int64_t& budget) {
  for (int64_t l = 0; l < n;) {
    int64_t m = l;
    while (m + 1 < n && std::abs(e2[m]) > kEps2 * std::abs(d[m] * d[m + 1])) ++m;
    if (m + 1 < n) e2[m] = 0;
    if (m == l) {
      ++l;
    } else if (m == l + 1) {
      eigenvalues_2x2(d[l], std::sqrt(e2[l]), d[l + 1], d[l], d[l + 1]);
      e2[l] = 0;
      l += 2;
    } else {
      if (budget-- == 0) return false;
      ql_sweep(d, e2, l, m, shift_at(d, e2, l));
    }
  }
  return true;
}

// x . y with four partial sums (a single one would keep the loop waiting on each addition).
double dot(const double* x, const double* y, int64_t m) {
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
Reflector make_reflector(const double* x, int64_t m, double* u) {
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
void scaled_product(const double* a, int64_t n, int64_t from, const double* u, double tau, double* p) {
  std::fill(p + from, p + n, 0.0);
  for (int64_t c = from; c < n; ++c) {
    const double uc = u[c] * tau;
    const double* col = a + c * n;
    for (int64_t r = from; r < n; ++r) p[r] += col[r] * uc;
  }
}

}  // namespace

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

bool tridiagonal_eigenvalues(double* diag, double* off, int64_t n) {
  if (n <= 1) return n == 0 || std::isfinite(diag[0]);
  double largest = 0;
  for (int64_t i = 0; i < 2 * n - 1; ++i) {
    const double v = i < n ? diag[i] : off[i - n];
    if (!std::isfinite(v)) return false;
    largest = std::max(largest, std::abs(v));
  }
  if (largest == 0) return true;
  // Scale by a power of two (exact) into [0.5, 1), so that the squared off-diagonals neither overflow nor underflow.
  int exponent = 0;
  std::frexp(largest, &exponent);
  const double down = std::ldexp(1.0, -exponent), up = std::ldexp(1.0, exponent);
  for (int64_t i = 0; i < n; ++i) diag[i] *= down;
  for (int64_t i = 0; i + 1 < n; ++i) off[i] = (off[i] * down) * (off[i] * down);

  int64_t budget = 30 * n;
  for (int64_t start = 0; start < n;) {
    int64_t end = start;  // the unreduced block [start, end]
    while (end + 1 < n && off[end] > kEps2 * std::abs(diag[end] * diag[end + 1])) ++end;
    if (end > start) {
      // QL converges from the top: start it at the end of smaller magnitude, as dsterf does.
      if (std::abs(diag[end]) < std::abs(diag[start])) {
        std::reverse(diag + start, diag + end + 1);
        std::reverse(off + start, off + end);
      }
      if (!ql_block(diag + start, off + start, end - start + 1, budget)) return false;
    }
    start = end + 1;
  }
  for (int64_t i = 0; i < n; ++i) diag[i] *= up;
  return true;
}

}  // namespace spread
