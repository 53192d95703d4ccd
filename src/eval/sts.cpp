// Spearman's rho as Pearson's correlation of average ranks; the promises are in sts.h.
#include "spread/eval/sts.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

namespace spread {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

bool any_nan(const std::vector<double>& v) {
  return std::any_of(v.begin(), v.end(), [](double x) { return std::isnan(x); });
}

bool constant(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(), [&](double x) { return x == v.front(); });
}

double mean(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / double(v.size()); }

// Pearson's r, centring first (two passes) as numpy.corrcoef does; clipped to [-1, 1] as it is.
double pearson(const std::vector<double>& a, const std::vector<double>& b) {
  const double ma = mean(a), mb = mean(b);
  double ab = 0.0, aa = 0.0, bb = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double da = a[i] - ma, db = b[i] - mb;
    ab += da * db;
    aa += da * da;
    bb += db * db;
  }
  return std::clamp(ab / std::sqrt(aa * bb), -1.0, 1.0);
}

}  // namespace

std::vector<double> average_ranks(const std::vector<double>& v) {
  const size_t n = v.size();
  if (any_nan(v)) return std::vector<double>(n, kNaN);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t(0));
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> ranks(n);
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    while (j < n && v[order[j]] == v[order[i]]) ++j;
    // Sorted positions i..j-1 (0-based) hold ranks i+1..j, whose mean is (i + 1 + j) / 2.
    const double shared = 0.5 * static_cast<double>(i + 1 + j);
    for (size_t t = i; t < j; ++t) ranks[order[t]] = shared;
    i = j;
  }
  return ranks;
}

double spearman(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size()) {
    throw std::invalid_argument("spearman: " + std::to_string(x.size()) + " values against " +
                                std::to_string(y.size()));
  }
  if (x.size() < 2) throw std::invalid_argument("spearman: needs at least 2 pairs, got " + std::to_string(x.size()));
  if (any_nan(x) || any_nan(y) || constant(x) || constant(y)) return kNaN;
  return pearson(average_ranks(x), average_ranks(y));
}

}  // namespace spread
