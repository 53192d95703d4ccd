// Ward token pooling (ward.h): distances from a Gram matrix, budgets, cluster means, many documents on worker
// threads, and the threshold calibration. The tree and its cuts are in ward_linkage.cpp.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "spread/runtime/vectorize.h"
#include "ward_internal.h"

namespace spread {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Gram blocks g[i][j] = <row i, row j> of m rows: every R x 16 block that touches the upper triangle, each starting
// at a column that is a multiple of 8, in W-wide vectors. y_t: the rows transposed, d x mc with mc >= ceil8(m) + 8
// (the last block's overhang); both operands are read from it, so the rows are copied once. The padding is never
// read back.
// The R x 16 accumulators stay in registers across the whole k loop: several times faster than Eigen's product in
// a portable build, where 64 documents of 180 x 128 take ~0.27 GFLOP for the triangles alone.
template <int R, int W>
inline __attribute__((always_inline)) void gram_blocks(const double* y_t, int64_t m, int64_t mc, int64_t d,
                                                       double* g) {
  using V = ward_detail::Lanes<W>;
  constexpr int kVectors = 16 / W;
  for (int64_t i0 = 0; i0 < m; i0 += R)
    for (int64_t j0 = i0 / 8 * 8; j0 < m; j0 += 16) {
      typename V::Double acc[R][kVectors] = {};
      for (int64_t k = 0; k < d; ++k) {
        typename V::Double b[kVectors];
        for (int v = 0; v < kVectors; ++v) b[v] = reinterpret_cast<const typename V::Unaligned*>(y_t + k * mc + j0)[v];
        for (int r = 0; r < R; ++r) {
          const double a = y_t[k * mc + i0 + r];
          for (int v = 0; v < kVectors; ++v) acc[r][v] += a * b[v];
        }
      }
      for (int r = 0; r < R; ++r)
        for (int v = 0; v < kVectors; ++v)
          reinterpret_cast<typename V::Unaligned*>(g + (i0 + r) * mc + j0)[v] = acc[r][v];
    }
}

// Rows per block: as many accumulators as the vector registers hold with room for the operands (AVX-512: 32
// registers, 8 rows, 14% faster than 4; AVX2 and SSE: 16). Padding is to kGramRows, a multiple of each.
constexpr int64_t kGramRows = 8;

#ifdef SPREAD_WARD_X86
SPREAD_TARGET_AVX512 void gram_avx512(const double* y_t, int64_t m, int64_t mc, int64_t d, double* g) {
  gram_blocks<8, 8>(y_t, m, mc, d, g);
}
SPREAD_TARGET_AVX2 void gram_avx2(const double* y_t, int64_t m, int64_t mc, int64_t d, double* g) {
  gram_blocks<4, 4>(y_t, m, mc, d, g);
}
#endif

void gram_upper_blocks(const double* y_t, int64_t m, int64_t mc, int64_t d, double* g) {
#ifdef SPREAD_WARD_X86
  if (ward_detail::simd() == ward_detail::Simd::kAvx512) return gram_avx512(y_t, m, mc, d, g);
  if (ward_detail::simd() == ward_detail::Simd::kAvx2) return gram_avx2(y_t, m, mc, d, g);
#endif
  gram_blocks<2, 2>(y_t, m, mc, d, g);
}

// Inner products -> distances in place (docs/design.md §6.3 step 3), in numpy's arithmetic: 1 - g and 2 - 2g round the
// same with or without a fused multiply-add, since 2g is exact.
SPREAD_VECTOR_CLONES
void distances_from_inner(double* v, int64_t count, bool euclidean) {
  if (euclidean)
    for (int64_t i = 0; i < count; ++i) v[i] = std::sqrt(std::clamp(2.0 - 2.0 * v[i], 0.0, 4.0));
  else
    for (int64_t i = 0; i < count; ++i) v[i] = std::clamp(1.0 - v[i], 0.0, 2.0);
}

// dst[j][i] = src[i][j] for i < rows, j < cols (row strides given), or only for j > i when `strict_upper` (which
// mirrors a square matrix's upper triangle when dst == src). 16 x 16 tiles keep both sides in cache: read or
// written column by column, the 180 x 128 operands and the 180 x 180 distances took 10% of the pooling time.
void copy_transposed(const double* src, int64_t src_stride, double* dst, int64_t dst_stride, int64_t rows,
                     int64_t cols, bool strict_upper) {
  constexpr int64_t kTile = 16;
  for (int64_t i0 = 0; i0 < rows; i0 += kTile)
    for (int64_t j0 = strict_upper ? i0 : 0; j0 < cols; j0 += kTile)
      for (int64_t i = i0; i < std::min(i0 + kTile, rows); ++i)
        for (int64_t j = strict_upper ? std::max(j0, i + 1) : j0; j < std::min(j0 + kTile, cols); ++j)
          dst[j * dst_stride + i] = src[i * src_stride + j];
}

// Per-thread scratch for the Gram operands and the distance matrix. Documents are pooled one after another, and
// allocating these (0.7 MB at 180 tokens) for each one cost ~10% of the time in page faults. Buffers above 32 MB
// are released after each document, so that one very long document does not pin its memory.
struct Scratch {
  std::vector<double> y_t, dist;

  void trim() {
    constexpr size_t kKeep = size_t(1) << 22;
    for (std::vector<double>* v : {&y_t, &dist})
      if (v->capacity() > kKeep) std::vector<double>().swap(*v);
  }
};

Scratch& thread_scratch() {
  thread_local Scratch scratch;
  return scratch;
}

// The m x m distances with +inf on the diagonal, rows `stride` apart: the layout ward_detail::linkage_in_place
// works on. They live in the scratch until its next use.
struct SquareDistances {
  double* data;
  int64_t m, stride;
  double at(int64_t i, int64_t j) const { return data[i * stride + j]; }
};

SquareDistances square_distances(const Eigen::Ref<const RowMatrixXd>& y, WardDistance mode, Scratch& s) {
  const int64_t m = y.rows(), d = y.cols();
  const int64_t mr = (m + kGramRows - 1) / kGramRows * kGramRows, mc = (m + 7) / 8 * 8 + 8;
  // The padding columns of y_t only reach Gram entries past m, which nothing reads: no zero fill.
  s.y_t.resize(size_t(d * mc));
  s.dist.resize(size_t(mr * mc));
  copy_transposed(y.data(), y.outerStride(), s.y_t.data(), mc, m, d, false);
  double* g = s.dist.data();
  gram_upper_blocks(s.y_t.data(), m, mc, d, g);
  for (int64_t i = 0; i < m; ++i) {
    distances_from_inner(g + i * mc + i + 1, m - i - 1, mode == WardDistance::kEuclidean);
    g[i * mc + i] = kInf;
  }
  copy_transposed(g, mc, g, mc, m, m, true);
  return {g, m, mc};
}

WardLinkage linkage_of_rows(const Eigen::Ref<const RowMatrixXd>& y, WardDistance mode) {
  Scratch& scratch = thread_scratch();
  const SquareDistances d = square_distances(y, mode, scratch);
  WardLinkage z = ward_detail::linkage_in_place(d.data, d.m, d.stride);
  scratch.trim();
  return z;
}

void check_budget(const WardBudget& b) {
  using Kind = WardBudget::Kind;
  const bool ok = std::isfinite(b.value) && (b.kind == Kind::kPoolFactor           ? b.value >= 1
                                             : b.kind == Kind::kMaxTokens          ? b.value >= 1
                                                                                   : b.value >= 0);
  if (!ok)
    throw std::invalid_argument("ward pooling: the budget must be a pool factor >= 1, max tokens >= 1 or a "
                                "distance threshold >= 0");
}

// Whether all of v[0, count) is finite: a double is infinite or NaN exactly when its exponent bits are all set. An
// integer count vectorizes where a floating-point test does not (Eigen's allFinite took 5% of the pooling time).
SPREAD_VECTOR_CLONES
bool all_finite(const double* v, int64_t count) {
  constexpr uint64_t kExponent = 0x7ff0000000000000ull;
  int64_t non_finite = 0;
  for (int64_t i = 0; i < count; ++i) {
    uint64_t bits;
    std::memcpy(&bits, v + i, sizeof bits);
    non_finite += (bits & kExponent) == kExponent;
  }
  return non_finite == 0;
}

void check_tokens(const Eigen::Ref<const RowMatrixXd>& tokens, int64_t protected_tokens) {
  if (protected_tokens < 0) throw std::invalid_argument("ward pooling: protected_tokens must be >= 0");
  for (int64_t i = 0; i < tokens.rows(); ++i)
    if (!all_finite(tokens.row(i).data(), tokens.cols()))
      throw std::invalid_argument("ward pooling: token " + std::to_string(i) + " is not finite");
}

// The k of a count budget (pool factor, max tokens) for m poolable rows out of n; 0 when no merge is needed.
int64_t target_clusters(const WardBudget& b, int64_t n, int64_t protected_rows, int64_t m) {
  int64_t k = m;
  if (b.kind == WardBudget::Kind::kPoolFactor) k = std::max<int64_t>(int64_t(std::floor(double(m) / b.value)), 1);
  if (b.kind == WardBudget::Kind::kMaxTokens && double(n) > b.value)
    k = std::max<int64_t>(int64_t(b.value) - protected_rows, 1);
  return m <= 1 || k >= m ? 0 : k;
}

// Cluster labels of the m poolable rows under the budget; every row alone when nothing merges.
std::vector<int64_t> cluster_rows(const Eigen::Ref<const RowMatrixXd>& y, const WardBudget& b, int64_t n,
                                  int64_t protected_rows, WardDistance mode) {
  const int64_t m = y.rows();
  const bool by_threshold = b.kind == WardBudget::Kind::kDistanceThreshold;
  const int64_t k = by_threshold ? 0 : target_clusters(b, n, protected_rows, m);
  if (m <= 1 || (!by_threshold && k == 0)) return ward_detail::singletons(m);
  const WardLinkage z = linkage_of_rows(y, mode);
  return by_threshold ? cut_distance(z, b.value) : cut_max_clusters(z, k);
}

// [protected rows; normalize(mean of each cluster)], clusters in label order.
RowMatrixXd pooled_vectors(const Eigen::Ref<const RowMatrixXd>& tokens, int64_t protected_rows,
                           const std::vector<int64_t>& labels) {
  const int64_t clusters = labels.empty() ? 0 : *std::max_element(labels.begin(), labels.end()) + 1;
  RowMatrixXd out = RowMatrixXd::Zero(protected_rows + clusters, tokens.cols());
  out.topRows(protected_rows) = tokens.topRows(protected_rows);
  std::vector<int64_t> members(size_t(clusters), 0);
  for (size_t i = 0; i < labels.size(); ++i) {
    out.row(protected_rows + labels[i]) += tokens.row(protected_rows + int64_t(i));
    ++members[size_t(labels[i])];
  }
  for (int64_t c = 0; c < clusters; ++c) {
    auto p = out.row(protected_rows + c);
    p /= double(members[size_t(c)]);
    p /= std::max(p.norm(), 1e-12);
  }
  return out;
}

// fn(i) for i in [0, count) on `threads` threads (0 = all hardware threads); the first exception is rethrown.
void for_each_parallel(size_t count, int threads, const std::function<void(size_t)>& fn) {
  if (threads <= 0) threads = int(std::max(1u, std::thread::hardware_concurrency()));
  threads = int(std::max<size_t>(1, std::min(size_t(threads), count)));
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto worker = [&] {
    try {
      for (size_t i; (i = next.fetch_add(1)) < count;) fn(i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::current_exception();
      next = count;
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace

WardDistance parse_ward_distance(const std::string& name) {
  if (name == "cosine") return WardDistance::kCosine;
  if (name == "euclidean") return WardDistance::kEuclidean;
  throw std::invalid_argument("unknown ward distance '" + name + "' (cosine or euclidean)");
}

std::vector<double> ward_distances(const Eigen::Ref<const RowMatrixXd>& y, WardDistance mode) {
  const int64_t m = y.rows();
  Scratch& scratch = thread_scratch();
  const SquareDistances square = square_distances(y, mode, scratch);
  std::vector<double> condensed;
  condensed.reserve(size_t(m * (m - 1) / 2));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = i + 1; j < m; ++j) condensed.push_back(square.at(i, j));
  scratch.trim();
  return condensed;
}

WardPooled ward_pool(const Eigen::Ref<const RowMatrixXd>& tokens, const WardBudget& budget,
                     const WardPoolOptions& opt) {
  check_budget(budget);
  check_tokens(tokens, opt.protected_tokens);
  const int64_t n = tokens.rows(), protected_rows = std::min(opt.protected_tokens, n);
  const std::vector<int64_t> clusters =
      cluster_rows(tokens.bottomRows(n - protected_rows), budget, n, protected_rows, opt.distance);
  WardPooled out;
  out.labels.assign(size_t(protected_rows), -1);
  if (n > protected_rows) out.labels.insert(out.labels.end(), clusters.begin(), clusters.end());
  out.vectors = pooled_vectors(tokens, protected_rows, n > protected_rows ? clusters : std::vector<int64_t>{});
  return out;
}

std::vector<WardPooled> ward_pool_many(const std::vector<RowMatrixXd>& docs, const WardBudget& budget,
                                       const WardPoolOptions& opt, int threads) {
  std::vector<WardPooled> out(docs.size());
  for_each_parallel(docs.size(), threads, [&](size_t i) { out[i] = ward_pool(docs[i], budget, opt); });
  return out;
}

WardCalibration calibrate_ward_threshold(const std::vector<RowMatrixXd>& docs, double target_tokens,
                                         const WardPoolOptions& opt, int threads) {
  if (docs.empty()) throw std::invalid_argument("calibrate_ward_threshold: no documents");
  if (!std::isfinite(target_tokens) || target_tokens < 1)
    throw std::invalid_argument("calibrate_ward_threshold: the target must be at least 1 token per document");
  std::vector<std::vector<double>> heights(docs.size());
  for_each_parallel(docs.size(), threads, [&](size_t i) {
    check_tokens(docs[i], opt.protected_tokens);
    const int64_t n = docs[i].rows(), protected_rows = std::min(opt.protected_tokens, n);
    if (n - protected_rows < 2) return;
    for (const WardMerge& z : linkage_of_rows(docs[i].bottomRows(n - protected_rows), opt.distance))
      heights[i].push_back(z.height);
  });
  std::vector<double> all;
  int64_t unpooled = 0;
  for (size_t i = 0; i < docs.size(); ++i) {
    all.insert(all.end(), heights[i].begin(), heights[i].end());
    unpooled += docs[i].rows();
  }
  std::sort(all.begin(), all.end());
  const double count = double(docs.size());
  const int64_t wanted_total = std::llround(target_tokens * count);
  const int64_t rank = std::clamp<int64_t>(unpooled - wanted_total, 0, int64_t(all.size()));
  WardCalibration c;
  c.threshold = rank == 0 ? 0.0 : all[size_t(rank - 1)];
  const auto merged = std::upper_bound(all.begin(), all.end(), c.threshold) - all.begin();
  c.target_mean = target_tokens;
  c.achieved_mean = double(unpooled - merged) / count;
  c.unpooled_mean = double(unpooled) / count;
  c.fewest_mean = double(unpooled - int64_t(all.size())) / count;
  c.documents = int64_t(docs.size());
  return c;
}

}  // namespace spread
