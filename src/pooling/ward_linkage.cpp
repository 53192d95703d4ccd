// Ward linkage as scipy.cluster.hierarchy computes it (scipy/cluster/_hierarchy.pyx: nn_chain, label, fcluster's
// cluster_monocrit), reimplemented on a full m x m matrix so that every scan reads one contiguous row.
// Bitwise agreement needs the same decisions and the same arithmetic:
//  - the chain starts at the lowest live cluster; a cluster's nearest neighbour is the lowest index at the minimum
//    distance, except that the previous chain element wins a tie (scipy's guard against cycles);
//  - the merged cluster keeps the higher slot; the Lance-Williams Ward update is evaluated in scipy's order
//    ((n_i + n_x) t d_xi d_xi + (n_i + n_y) t d_yi d_yi - n_i t d_xy d_xy, t = 1 / (n_x + n_y + n_i));
//  - merges are stably sorted by height, then relabelled with a union-find in that order.
// CMakeLists.txt compiles this file with -ffp-contract=off: a fused multiply-add in the update would round
// differently from scipy's build and break exact ties.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

#include "spread/runtime/vectorize.h"
#include "ward_internal.h"

namespace spread {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct ArgMin {
  double value;
  int64_t index;  // the lowest index holding `value`
};

// The minimum of row[i] + hidden[i] over [0, count) and the first index that holds it, in one pass of W-wide
// vectors: each lane keeps its first minimum (strict <), then the lowest index among the lanes at the overall
// minimum. hidden is +inf for dead clusters and 0 for live ones.
template <int W>
inline __attribute__((always_inline)) ArgMin masked_argmin(const double* row, const double* hidden, int64_t count) {
  using V = ward_detail::Lanes<W>;
  typename V::Double best;
  typename V::Int where, lane;
  for (int c = 0; c < W; ++c) {
    best[c] = kInf;
    where[c] = 0;
    lane[c] = c;
  }
  int64_t i = 0;
  for (; i + W <= count; i += W) {
    const typename V::Double v = *reinterpret_cast<const typename V::Unaligned*>(row + i) +
                                 *reinterpret_cast<const typename V::Unaligned*>(hidden + i);
    const typename V::Int less = v < best;
    best = less ? v : best;
    where = less ? lane + i : where;
  }
  ArgMin out{kInf, count};
  for (int c = 0; c < W; ++c)
    if (best[c] < out.value || (best[c] == out.value && where[c] < out.index)) out = {best[c], where[c]};
  for (; i < count; ++i)
    if (row[i] + hidden[i] < out.value) out = {row[i] + hidden[i], i};
  return out;
}

#ifdef SPREAD_WARD_X86
SPREAD_TARGET_AVX512 ArgMin masked_argmin_avx512(const double* row, const double* hidden, int64_t count) {
  return masked_argmin<8>(row, hidden, count);
}
SPREAD_TARGET_AVX2 ArgMin masked_argmin_avx2(const double* row, const double* hidden, int64_t count) {
  return masked_argmin<4>(row, hidden, count);
}
#endif

ArgMin masked_argmin_any(const double* row, const double* hidden, int64_t count) {
#ifdef SPREAD_WARD_X86
  if (ward_detail::simd() == ward_detail::Simd::kAvx512) return masked_argmin_avx512(row, hidden, count);
  if (ward_detail::simd() == ward_detail::Simd::kAvx2) return masked_argmin_avx2(row, hidden, count);
#endif
  return masked_argmin<2>(row, hidden, count);
}

// Row y <- the Ward distance of every cluster i to the union of x and y, over [0, count). The diagonal (+inf)
// stays +inf; dead entries get finite or infinite garbage (never NaN: their size is 0, so the subtracted term is
// 0), which the hidden mask keeps out of every scan. Sizes are doubles so that the loop vectorizes:
// double(n_i + n_x) == n_i + n_x exactly.
SPREAD_VECTOR_CLONES
void ward_update(const double* row_x, double* row_y, const double* sizes, double d_xy, double n_x, double n_y,
                 int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const double n_i = sizes[i];
    const double t = 1.0 / (n_x + n_y + n_i);
    row_y[i] = std::sqrt((n_i + n_x) * t * row_x[i] * row_x[i] + (n_i + n_y) * t * row_y[i] * row_y[i] -
                         n_i * t * d_xy * d_xy);
  }
}

struct ChainMerge {
  int64_t x, y;  // slots, x < y; the union lives on in slot y
  double height;
};

// scipy's nn_chain on a full matrix. Dead clusters are hidden by a mask instead of overwriting their column, and
// scans and updates cover only the slots between the lowest and the highest live one.
class NnChain {
 public:
  NnChain(double* d, int64_t m, int64_t stride)
      : d_(d), m_(m), stride_(stride), sizes_(size_t(m), 1.0), hidden_(size_t(m), 0.0), live_(size_t(m)) {
    std::iota(live_.begin(), live_.end(), int64_t(0));
    chain_.reserve(size_t(m));
  }

  std::vector<ChainMerge> run() {
    std::vector<ChainMerge> merges;
    merges.reserve(size_t(m_ - 1));
    for (int64_t k = 0; k < m_ - 1; ++k) merges.push_back(merge(mutual_neighbours()));
    return merges;
  }

 private:
  const double* row(int64_t i) const { return d_ + i * stride_; }

  // The chain grows from the lowest live cluster through nearest neighbours until two are each other's.
  std::pair<int64_t, int64_t> mutual_neighbours() {
    if (chain_.empty()) chain_.push_back(live_.front());
    for (;;) {
      const int64_t x = chain_.back(), y = nearest(x);
      if (chain_.size() > 1 && y == chain_[chain_.size() - 2]) {
        chain_.resize(chain_.size() - 2);
        return {std::min(x, y), std::max(x, y)};
      }
      chain_.push_back(y);
    }
  }

  // The lowest live index at the minimum distance from x, except that the previous chain element wins a tie.
  int64_t nearest(int64_t x) const {
    const int64_t lo = live_.front(), count = live_.back() + 1 - lo;
    const ArgMin best = masked_argmin_any(row(x) + lo, hidden_.data() + lo, count);
    if (chain_.size() > 1 && row(x)[chain_[chain_.size() - 2]] == best.value) return chain_[chain_.size() - 2];
    return lo + best.index;
  }

  ChainMerge merge(std::pair<int64_t, int64_t> pair) {
    const auto [x, y] = pair;
    const double height = row(x)[y], n_x = sizes_[size_t(x)], n_y = sizes_[size_t(y)];
    sizes_[size_t(x)] = 0;
    hidden_[size_t(x)] = kInf;
    sizes_[size_t(y)] = n_x + n_y;
    const int64_t lo = live_.front(), count = live_.back() + 1 - lo;
    double* row_y = d_ + y * stride_;
    ward_update(row(x) + lo, row_y + lo, sizes_.data() + lo, height, n_x, n_y, count);
    live_.erase(std::lower_bound(live_.begin(), live_.end(), x));
    for (int64_t i : live_) d_[i * stride_ + y] = row_y[i];
    return {x, y, height};
  }

  double* d_;
  int64_t m_, stride_;
  std::vector<double> sizes_;   // rows per cluster, 0 = dead
  std::vector<double> hidden_;  // +inf = dead
  std::vector<int64_t> live_;   // live slots, ascending
  std::vector<int64_t> chain_;
};

// scipy's LinkageUnionFind: the current cluster id of a slot, ids m, m + 1, .. given in merge order.
class ClusterIds {
 public:
  explicit ClusterIds(int64_t m) : parent_(size_t(2 * m - 1)), size_(size_t(2 * m - 1), 1), next_(m) {
    std::iota(parent_.begin(), parent_.end(), int64_t(0));
  }
  int64_t find(int64_t x) {
    int64_t root = x;
    while (parent_[size_t(root)] != root) root = parent_[size_t(root)];
    while (parent_[size_t(x)] != root) x = std::exchange(parent_[size_t(x)], root);
    return root;
  }
  int64_t merge(int64_t a, int64_t b) {  // a, b: roots; returns the new cluster's size
    parent_[size_t(a)] = parent_[size_t(b)] = next_;
    size_[size_t(next_)] = size_[size_t(a)] + size_[size_t(b)];
    return size_[size_t(next_++)];
  }

 private:
  std::vector<int64_t> parent_, size_;
  int64_t next_;
};

WardLinkage sort_and_label(const std::vector<ChainMerge>& merges, int64_t m) {
  std::vector<size_t> order(merges.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return merges[a].height < merges[b].height; });
  ClusterIds ids(m);
  WardLinkage z;
  z.reserve(merges.size());
  for (size_t r : order) {
    const int64_t a = ids.find(merges[r].x), b = ids.find(merges[r].y);
    WardMerge row{std::min(a, b), std::max(a, b), merges[r].height, 0};
    row.size = ids.merge(a, b);
    z.push_back(row);
  }
  return z;
}

// fcluster's monotonic criterion: the largest height inside each merge's subtree (children precede parents in Z).
std::vector<double> max_heights(const WardLinkage& z) {
  const int64_t m = int64_t(z.size()) + 1;
  std::vector<double> mc(z.size());
  for (size_t r = 0; r < z.size(); ++r) {
    double h = z[r].height;
    for (int64_t child : {z[r].left, z[r].right})
      if (child >= m) h = std::max(h, mc[size_t(child - m)]);
    mc[r] = h;
  }
  return mc;
}

// scipy's cluster_monocrit: every maximal subtree whose criterion is <= cutoff is one cluster, every other row
// its own; clusters are numbered in scipy's traversal order (a node's internal children, left first, before its
// leaf children).
std::vector<int64_t> monocrit_clusters(const WardLinkage& z, const std::vector<double>& mc, double cutoff) {
  const int64_t m = int64_t(z.size()) + 1;
  std::vector<int64_t> labels(size_t(m), 0);
  std::vector<bool> visited(size_t(2 * m - 1), false);
  std::vector<int64_t> stack{2 * m - 2};
  int64_t clusters = 0, leader = -1;
  while (!stack.empty()) {
    const int64_t node = stack.back() - m;
    const int64_t left = z[size_t(node)].left, right = z[size_t(node)].right;
    if (leader == -1 && mc[size_t(node)] <= cutoff) {
      leader = node;
      ++clusters;
    }
    bool descended = false;
    for (int64_t child : {left, right})
      if (!descended && child >= m && !visited[size_t(child)]) {
        visited[size_t(child)] = true;
        stack.push_back(child);
        descended = true;
      }
    if (descended) continue;
    for (int64_t child : {left, right})
      if (child < m) {
        if (leader == -1) ++clusters;
        labels[size_t(child)] = clusters - 1;
      }
    if (leader == node) leader = -1;
    stack.pop_back();
  }
  return labels;
}

}  // namespace

namespace ward_detail {

WardLinkage linkage_in_place(double* d, int64_t m, int64_t stride) {
  return sort_and_label(NnChain(d, m, stride).run(), m);
}

}  // namespace ward_detail

WardLinkage ward_linkage(const std::vector<double>& condensed) {
  const int64_t m = int64_t(std::llround((1 + std::sqrt(1 + 8.0 * double(condensed.size()))) / 2));
  if (m < 2 || uint64_t(m) * uint64_t(m - 1) / 2 != condensed.size())
    throw std::invalid_argument("ward_linkage: " + std::to_string(condensed.size()) +
                                " distances is not m (m - 1) / 2 for any m >= 2");
  for (double v : condensed)
    if (!std::isfinite(v) || v < 0) throw std::invalid_argument("ward_linkage: distances must be finite and >= 0");
  std::vector<double> d(size_t(m * m), kInf);
  size_t next = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = i + 1; j < m; ++j) d[size_t(i * m + j)] = d[size_t(j * m + i)] = condensed[next++];
  return ward_detail::linkage_in_place(d.data(), m, m);
}

std::vector<int64_t> cut_max_clusters(const WardLinkage& z, int64_t k) {
  const int64_t m = int64_t(z.size()) + 1;
  if (k < 1) throw std::invalid_argument("cut_max_clusters: k must be at least 1");
  if (k >= m) return ward_detail::singletons(m);
  // The lowest criterion value that leaves at most k clusters (a cut at mc[i] applies every merge whose
  // subtree maximum is <= mc[i], one cluster fewer each); scipy >= 1.15's binary search finds the same value.
  const std::vector<double> mc = max_heights(z);
  auto clusters_at = [&](double cutoff) { return m - int64_t(std::count_if(mc.begin(), mc.end(), [&](double h) {
                                                   return h <= cutoff;
                                                 })); };
  int64_t lower = -1, upper = m - 1;  // never read: clusters_at(mc[m - 2]) == 1 <= k moves it down
  while (upper - lower > 1) {
    const int64_t mid = (lower + upper) / 2;
    (clusters_at(mc[size_t(mid)]) > k ? lower : upper) = mid;
  }
  return monocrit_clusters(z, mc, mc[size_t(upper)]);
}

std::vector<int64_t> cut_distance(const WardLinkage& z, double tau) {
  if (z.empty()) return ward_detail::singletons(1);
  return monocrit_clusters(z, max_heights(z), tau);
}

}  // namespace spread
