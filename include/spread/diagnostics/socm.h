#pragma once
// SOCM, second-order collapse by mean pooling (Hara et al. 2026, arXiv:2604.27398; docs/design.md §7.3), in float64.
// Per text, X (n x d, rows = valid tokens):
//   mu = mean_j x_j;   X <- X / (||mu|| + 1e-12);   Sigma = (1/n) sum_j (x_j - mu)(x_j - mu)^T   (biased)
// Per pair of texts (1, 2):
//   d_mu    = ||mu1 - mu2||^2 / 4
//   d_sigma = max(0, tr Sigma1 + tr Sigma2 - 2 tr((Sigma1^{1/2} Sigma2 Sigma1^{1/2})^{1/2})) / 4
//   socm    = (1 - d_mu) * d_sigma
// No d x d matrix is formed: with F = Xc / sqrt(n), tr((Sigma1^{1/2} Sigma2 Sigma1^{1/2})^{1/2}) = ||F1 F2^T||_*,
// the nuclear norm of the n1 x n2 cross matrix. Each text is reduced once to a thin basis Q (r x d, r = numerical
// rank <= n - 1, F = U Q with U orthonormal), so a pair costs one r1 x r2 product (O(r1 r2 d)) and the singular
// values of that small matrix: square roots of the eigenvalues of its smaller Gram matrix where those are
// well conditioned (lambda_min >= 1e-8 lambda_max; measured error <= 3e-12 sigma_max), otherwise BDCSVD.
// socm_pairs forms the products of many pairs at once: all bases packed side by side (d x sum r), the bases of a
// block of consecutive first texts against their partners' as one float64 GEMM through the BLAS (tiles in
// SocmOptions), then the d-independent part of each pair on the worker threads: pairs whose Gram is at most 128
// wide eight at a time, one per vector lane (tridiagonal_lanes.h), wider ones one at a time (tridiagonal.h).
//
// paper_compatible reproduces the reference code (tohoku-nlp/socm-text-embedding, utils/distance.py), which adds
// eps I before each eigendecomposition:
//   tr Sigma1 + tr Sigma2 - 2 tr sqrt(S Sigma2 S + eps I),   S = (Sigma1 + eps I)^{1/2}.
// The nonzero eigenvalues of S Sigma2 S are those of Q2 (Sigma1 + eps I) Q2^T = M^T M + eps Q2 Q2^T (M = Q1 Q2^T),
// so the same thin bases give it exactly: sum_i sqrt(lambda_i + eps) + (d - r2) sqrt(eps). At d = 768 this lowers
// d_sigma by about 0.012 against the exact value (the default).
#include <Eigen/Core>

#include <cstdint>
#include <utility>
#include <vector>

namespace spread {

// tr Sigma above which a text is outside the range where the paper interprets SOCM: d_sigma's division by 4 keeps
// it in [0, 1] only while tr Sigma1 + tr Sigma2 <= 4. (tr Sigma of the mu-normalised text is its concentration.)
// Such texts are counted and flagged (probe logs, `spread diagnose`), never dropped.
constexpr double kSocmTraceLimit = 2.0;

// The formula of the pair value; it has the five properties of docs/design.md §7.3 (maximal only at d_mu = 0,
// d_sigma = 1; zero when d_mu = 1 or d_sigma = 0; non-increasing in d_mu, non-decreasing in d_sigma, negative cross
// derivative).
inline double socm_value(double d_mu, double d_sigma) { return (1.0 - d_mu) * d_sigma; }

enum class SocmSolver {
  kAuto,  // Gram eigenvalues when well conditioned, BDCSVD otherwise (fast and exact; the default)
  kSvd,   // BDCSVD singular values for every pair (a slower reference path, for benchmarks and tests)
};

struct SocmOptions {
  bool paper_compatible = false;  // reproduce the reference code's eps I regularisation (see above)
  double paper_eps = 1e-9;        // the eps of the reference code
  int64_t max_pairs = 0;          // 0 = all pairs; N = a seeded sample of N distinct pairs (all pairs if fewer)
  uint64_t seed = 0;              // seed of the pair sample
  int threads = 0;                // worker threads over pairs; 0 = all hardware threads
  SocmSolver solver = SocmSolver::kAuto;
  // Tiles of the all-pairs GEMM (socm_pairs): rows of first texts per product and partner columns per product.
  // The defaults suit the cache and the BLAS; tests set small ones to cross every tile boundary.
  int64_t block_rows = 512;
  int64_t chunk_columns = 4096;
};

// One text reduced for pairwise work.
struct SocmText {
  int64_t tokens = 0;
  int64_t dim = 0;
  Eigen::VectorXd mean;     // normalised mean, ||mean|| = ||mu|| / (||mu|| + 1e-12)
  double trace = 0;         // tr Sigma (all tokens)
  Eigen::MatrixXd basis_t;  // d x r: columns are the rows of Q, basis_t * basis_t^T = Sigma up to dropped rows
};

// Per-text work: normalise, centre, trace, thin basis. Rows of Q with norm <= 1e-10 of the largest are dropped
// (they change the nuclear norm by at most their norm times ||Q2||). Throws std::invalid_argument for n = 0.
SocmText socm_prepare(const Eigen::Ref<const Eigen::MatrixXd>& tokens);

struct SocmPair {
  double d_mu = 0;
  double d_sigma = 0;
  double socm = 0;
};

// One pair; both texts must have the same dim.
SocmPair socm_pair(const SocmText& a, const SocmText& b, const SocmOptions& opt = {});

using TextPair = std::pair<uint32_t, uint32_t>;  // (i, j), i < j

// All pairs i < j of n_texts texts in order, or (max_pairs > 0 and fewer than all) a seeded sample of max_pairs
// distinct pairs, sorted. Deterministic for a seed on every platform (own bounded draw on mt19937_64).
std::vector<TextPair> socm_pair_list(int64_t n_texts, int64_t max_pairs, uint64_t seed);

// Values of the given pairs (i < j), computed in parallel (opt.threads) and independent of the thread count; all
// texts must have one dim. Memory: a packed copy of all bases, one cross matrix of at most
// block_rows x chunk_columns (16 MiB) and per thread the lanes' buffers (at most about 5 MiB), whatever the number
// of pairs. Throws std::invalid_argument otherwise.
// `svd_pairs` (optional) receives how many pairs needed the BDCSVD fallback.
std::vector<SocmPair> socm_pairs(const std::vector<SocmText>& texts, const std::vector<TextPair>& pairs,
                                 const SocmOptions& opt = {}, int64_t* svd_pairs = nullptr);

// Quantiles with linear interpolation between order statistics (numpy's default, "type 7").
struct Quantiles {
  double p05 = 0, p25 = 0, p50 = 0, p75 = 0, p95 = 0;
};
Quantiles quantiles(std::vector<double> values);  // NaN everywhere when empty

struct SocmSummary {
  int64_t texts = 0;
  int64_t pairs = 0;
  int64_t svd_pairs = 0;  // pairs that took the BDCSVD fallback
  int64_t texts_over_trace = 0;  // texts with tr Sigma > kSocmTraceLimit
  double socm = 0, d_mu = 0, d_sigma = 0;  // means over pairs (NaN without pairs)
  Quantiles socm_q, d_mu_q, d_sigma_q;
};

// Means and quantiles over all pairs of `texts` (or the sample opt.max_pairs / opt.seed), by socm_pairs. Keeps the
// per-pair values (24 bytes a pair, and 8 for the pair list) for exact quantiles.
SocmSummary socm_summary(const std::vector<SocmText>& texts, const SocmOptions& opt = {});

// For the trainer's diagnostics: means over all pairs of the probe texts (one n x d list per text, e.g. the last
// layer's hidden states of each probe sequence; empty lists are skipped). NaN means when fewer than two texts.
struct SocmMeans {
  double socm = 0, d_mu = 0, d_sigma = 0;
  int64_t pairs = 0;
  int64_t texts = 0;
  int64_t texts_over_trace = 0;  // texts with tr Sigma > kSocmTraceLimit
};

// How many of `texts` have tr Sigma > kSocmTraceLimit.
int64_t count_over_trace(const std::vector<SocmText>& texts);
SocmMeans socm_means(const std::vector<Eigen::MatrixXd>& token_lists, const SocmOptions& opt = {});

}  // namespace spread
