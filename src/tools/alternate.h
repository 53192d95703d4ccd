#pragma once
// Timing two variants on a shared machine whose speed drifts (±15% within minutes here): run them in pairs, in the
// order A B, B A, A B, ... so that a drift lands on both sides equally, and compare them by the median of the
// per-pair ratios. Used by bench_step and bench_attention.
#include <cstdint>
#include <functional>
#include <vector>

#include "spread/diagnostics/socm.h"

namespace spread::bench {

struct PairTimes {
  std::vector<double> a, b;  // one time per pair, in the units the callables return

  double median_a() const { return quantiles(a).p50; }
  double median_b() const { return quantiles(b).p50; }
  double median_ratio() const {  // median of b / a over pairs
    std::vector<double> r;
    for (size_t i = 0; i < a.size(); ++i) r.push_back(b[i] / a[i]);
    return quantiles(r).p50;
  }
};

// time_a and time_b each run their variant once and return its time; on_pair(i, a, b) sees every pair.
inline PairTimes alternate_pairs(int64_t pairs, const std::function<double()>& time_a,
                                 const std::function<double()>& time_b,
                                 const std::function<void(int64_t, double, double)>& on_pair = {}) {
  PairTimes t;
  for (int64_t i = 0; i < pairs; ++i) {
    double x, y;
    if (i % 2 == 0) x = time_a(), y = time_b();
    else y = time_b(), x = time_a();
    t.a.push_back(x), t.b.push_back(y);
    if (on_pair) on_pair(i, x, y);
  }
  return t;
}

}  // namespace spread::bench
