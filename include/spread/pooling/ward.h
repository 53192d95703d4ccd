#pragma once
// Ward token pooling of multi-vector documents (docs/design.md §6.3; Clavié et al. 2024, arXiv:2409.14683; the
// HierarchicalTokenPooling of sentence-transformers and PyLate >= 1.3.5). One document E (n x d, unit rows):
//   1. the first P tokens are protected (kept as they are): Y = E[P:], m = rows(Y); m <= 1 means no merge;
//   2. one budget: pool_factor f (k = max(floor(m / f), 1)), max_tokens T (counts the protected tokens: n <= T means
//      no merge, else k = max(T - P, 1)) or distance_threshold tau; k >= m means no merge;
//   3. float64 distances D_ij = clamp(1 - <y_i, y_j>, 0, 2) (cosine, the default) or sqrt(clamp(2 - 2 <y_i, y_j>, 0, 4))
//      (euclidean: the distance of unit rows, which Ward's update assumes; PyLate PR #234);
//   4. the Ward tree of scipy.cluster.hierarchy.linkage(D, 'ward'): nearest-neighbour chain with scipy's tie rules and
//      arithmetic, merges sorted by height (stable), clusters relabelled as scipy does; so the tree, heights and ids
//      are scipy's bit for bit wherever the distances are;
//   5. cut: k clusters as fcluster(Z, k, 'maxclust') in SciPy >= 1.15 (every merge up to the height of merge m - k;
//      ties at that height may leave fewer than k clusters, never an empty one), tau as fcluster(Z, tau, 'distance')
//      (every merge with height <= tau);
//   6. output [E[:P]; p_1 .. p_K], p_c = normalize(mean_{i in c} y_i), in fcluster's cluster order.
// SciPy <= 1.14 differs in one case: its maxclust binary search never tried the lowest merge, so k = m - 1 merged
// two pairs instead of one (scipy#12651, fixed by scipy#21121); spread follows the fix.
// Cost: O(m^2 d) for the distances and O(m^2) for the tree, O(m^2) memory per document (180 tokens: 270 KB of
// distances, reused per thread). bench/bench_pooling.sh (64 documents of 180 tokens at d = 128, pool factor 4,
// one core): 21 ms per call when this 2-core VM runs at full speed, 26-34 ms in its slow phases (target: 25 ms);
// a quarter of that is the float64 Gram matrix, a third the chain (updates, nearest-neighbour scans).
#include <Eigen/Core>

#include <cstdint>
#include <string>
#include <vector>

namespace spread {

using RowMatrixXd = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

enum class WardDistance { kCosine, kEuclidean };

// "cosine" | "euclidean"; throws std::invalid_argument naming the valid values otherwise.
WardDistance parse_ward_distance(const std::string& name);

// The distances of the rows of y in scipy's condensed order (0,1), (0,2), .., (0,m-1), (1,2), .., (m-2,m-1).
std::vector<double> ward_distances(const Eigen::Ref<const RowMatrixXd>& y, WardDistance mode);

// One row of scipy's linkage matrix Z: merge r joins clusters `left` < `right` (ids < m are the input rows, id m + j
// is the cluster made by row j) at `height`, giving a cluster of `size` rows. Rows are sorted by height.
struct WardMerge {
  int64_t left = 0;
  int64_t right = 0;
  double height = 0;
  int64_t size = 0;
};
using WardLinkage = std::vector<WardMerge>;  // m - 1 rows

// scipy.cluster.hierarchy.linkage(condensed, 'ward'). Throws std::invalid_argument when the length is not
// m (m - 1) / 2 for some m >= 2 or a distance is negative or not finite (scipy's own checks).
WardLinkage ward_linkage(const std::vector<double>& condensed);

// Flat clusters of the m rows as 0-based ids in fcluster's numbering (fcluster - 1).
std::vector<int64_t> cut_max_clusters(const WardLinkage& z, int64_t k);  // k >= 1; k >= m: every row alone
std::vector<int64_t> cut_distance(const WardLinkage& z, double tau);      // merges with height <= tau

// Exactly one budget (step 2 above).
struct WardBudget {
  enum class Kind { kPoolFactor, kMaxTokens, kDistanceThreshold };
  Kind kind = Kind::kPoolFactor;
  double value = 4;
  static WardBudget pool_factor(double f) { return {Kind::kPoolFactor, f}; }          // f >= 1
  static WardBudget max_tokens(int64_t t) { return {Kind::kMaxTokens, double(t)}; }   // t >= 1
  static WardBudget distance_threshold(double tau) { return {Kind::kDistanceThreshold, tau}; }  // tau >= 0
};

struct WardPoolOptions {
  int64_t protected_tokens = 1;  // P: leading tokens kept as they are (1: [CLS] only); more than n protects all
  WardDistance distance = WardDistance::kCosine;
};

struct WardPooled {
  RowMatrixXd vectors;          // [P' + K, d]: the protected rows as given (P' = min(P, n)), then unit cluster means
  std::vector<int64_t> labels;  // n: -1 for a protected token, else its cluster c (its vector is row P' + c)
};

// Pools one document (tokens: n x d, finite; rows are used as given, docs/design.md §6.3 assumes unit rows).
// Throws std::invalid_argument for a bad budget (f < 1, t < 1, tau < 0 or not finite) or non-finite tokens.
WardPooled ward_pool(const Eigen::Ref<const RowMatrixXd>& tokens, const WardBudget& budget,
                     const WardPoolOptions& opt = {});

// ward_pool of every document, documents spread over `threads` worker threads (0 = all hardware threads); the
// result does not depend on the thread count.
std::vector<WardPooled> ward_pool_many(const std::vector<RowMatrixXd>& docs, const WardBudget& budget,
                                       const WardPoolOptions& opt = {}, int threads = 0);

// The distance threshold whose mean output count (protected tokens included) over `docs` is `target_tokens`: all
// merge heights of the sample sorted, tau = the height of rank r, r = the number of merges that brings the total
// count to round(target x documents). Documents that cannot merge keep their count. Ties at tau merge together, so
// the achieved mean can fall below the target by one tie group; a target at or above the unpooled mean gives
// tau = 0 (only merges at height 0, exact duplicates, happen). A larger target never gives a larger tau.
struct WardCalibration {
  double threshold = 0;
  double target_mean = 0;
  double achieved_mean = 0;  // mean output count at `threshold`
  double unpooled_mean = 0;  // mean n: the most a target can reach (threshold 0)
  double fewest_mean = 0;    // mean count after every merge: the least a target can reach
  int64_t documents = 0;
};
WardCalibration calibrate_ward_threshold(const std::vector<RowMatrixXd>& docs, double target_tokens,
                                         const WardPoolOptions& opt = {}, int threads = 0);

}  // namespace spread
