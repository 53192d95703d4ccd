// SOCM over pairs of token lists without d x d matrices; the formulas and the method are in socm.h.
#include "spread/diagnostics/socm.h"

#include <Eigen/Eigenvalues>
#include <Eigen/QR>
#include <Eigen/SVD>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <limits>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>
#include <unordered_set>

namespace spread {
namespace {

using Eigen::Index;
using Eigen::MatrixXd;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kMeanEps = 1e-12;  // SPEC 1.3: X / (||mu|| + 1e-12), as the reference code
// Rows of the thin basis this small relative to the largest are rounding noise of a rank-deficient list
// (centring alone removes one rank); dropping a row of norm s moves a nuclear norm by at most s * ||Q2||.
constexpr double kDropRow = 1e-10;
// Eigenvalues of a Gram matrix carry an absolute error of about eps * lambda_max, so sqrt(lambda) is accurate
// only while lambda_min stays well above it. Measured against long-double SVDs of 20k graded 1..64 x 1..64
// matrices: worst |sum sqrt(lambda) - ||M||_*| = 3e-13 sigma_max at this ratio, 2e-8 sigma_max below 1e-15.
constexpr double kGramCondition = 1e-8;
constexpr size_t kChunkBytes = size_t(4) << 20;  // gathered partner bases per GEMM (stays in L2/L3)

// Thin basis of F (n x d): F P = H R (column-pivoted Householder QR, H orthonormal), so F = H (R P^T) and for two
// texts F1 F2^T = H1 (Q1 Q2^T) H2^T with Q = R P^T: same singular values, r1 x r2 instead of n1 x n2. Returns Q^T.
MatrixXd thin_basis_t(const MatrixXd& f) {
  Eigen::ColPivHouseholderQR<MatrixXd> qr(f);
  const Index k = std::min(f.rows(), f.cols());
  MatrixXd r = qr.matrixR().topRows(k).triangularView<Eigen::Upper>();
  MatrixXd q = r * qr.colsPermutation().transpose();
  Eigen::VectorXd norms = q.rowwise().norm();
  const double largest = k > 0 ? norms.maxCoeff() : 0.0;
  std::vector<Index> keep;
  for (Index i = 0; i < k; ++i)
    if (largest > 0 && norms(i) > kDropRow * largest) keep.push_back(i);
  MatrixXd basis_t(f.cols(), Index(keep.size()));
  for (size_t c = 0; c < keep.size(); ++c) basis_t.col(Index(c)) = q.row(keep[c]).transpose();
  return basis_t;
}

struct Workspace {
  MatrixXd gathered;  // d x R: bases of the partners of one text, side by side
  MatrixXd cross;     // r_i x R: Q_i against all gathered partners
  MatrixXd gram;
  Eigen::SelfAdjointEigenSolver<MatrixXd> eig;
  int64_t svd_pairs = 0;
};

// ||M||_* = sum of singular values of M (r1 x r2).
double nuclear_norm(const Eigen::Ref<const MatrixXd>& m, SocmSolver solver, Workspace& ws) {
  const Index k = std::min(m.rows(), m.cols());
  if (k == 0) return 0.0;
  if (solver == SocmSolver::kAuto) {
    ws.gram.setZero(k, k);
    if (m.rows() <= m.cols()) ws.gram.selfadjointView<Eigen::Lower>().rankUpdate(m);
    else ws.gram.selfadjointView<Eigen::Lower>().rankUpdate(m.transpose());
    ws.eig.compute(ws.gram, Eigen::EigenvaluesOnly);
    const Eigen::VectorXd& ev = ws.eig.eigenvalues();  // ascending
    if (ev(k - 1) <= 0) return 0.0;
    if (ev(0) >= kGramCondition * ev(k - 1)) return ev.cwiseSqrt().sum();
  }
  ++ws.svd_pairs;
  return Eigen::BDCSVD<MatrixXd>(m).singularValues().sum();
}

// The reference code's tr sqrt(S Sigma2 S + eps I), S = (Sigma1 + eps I)^{1/2}, from M = Q1 Q2^T (r1 x r2).
// The +eps keeps every square root away from zero, so Gram eigenvalues are accurate here.
double paper_trace_sqrt(const Eigen::Ref<const MatrixXd>& m, const MatrixXd& basis2_t, double eps, Workspace& ws) {
  const Index r2 = basis2_t.cols(), d = basis2_t.rows();
  double sum = double(d - r2) * std::sqrt(eps);
  if (r2 == 0) return sum;
  ws.gram.setZero(r2, r2);
  if (m.rows() > 0) ws.gram.selfadjointView<Eigen::Lower>().rankUpdate(m.transpose());  // M^T M
  ws.gram.selfadjointView<Eigen::Lower>().rankUpdate(basis2_t.transpose(), eps);         // + eps Q2 Q2^T
  ws.eig.compute(ws.gram, Eigen::EigenvaluesOnly);
  for (Index i = 0; i < r2; ++i) sum += std::sqrt(std::max(ws.eig.eigenvalues()(i), 0.0) + eps);
  return sum;
}

SocmPair pair_from_cross(const SocmText& a, const SocmText& b, const Eigen::Ref<const MatrixXd>& m,
                         const SocmOptions& opt, Workspace& ws) {
  SocmPair p;
  p.d_mu = (a.mean - b.mean).squaredNorm() / 4.0;
  const double t = opt.paper_compatible ? paper_trace_sqrt(m, b.basis_t, opt.paper_eps, ws)
                                        : nuclear_norm(m, opt.solver, ws);
  p.d_sigma = std::max(0.0, a.trace + b.trace - 2.0 * t) / 4.0;
  p.socm = socm_value(p.d_mu, p.d_sigma);
  return p;
}

// Unbiased draw in [0, n) from mt19937_64 (std::uniform_int_distribution differs between standard libraries).
uint64_t draw_below(std::mt19937_64& rng, uint64_t n) {
  const uint64_t threshold = (0 - n) % n;  // 2^64 mod n: reject the incomplete last block
  for (;;) {
    uint64_t x = rng();
    if (x >= threshold) return x % n;
  }
}

// Runs of pairs that share their first text, so each text's basis meets its partners in a few larger GEMMs.
std::vector<std::pair<size_t, size_t>> runs_by_first(const std::vector<TextPair>& pairs) {
  std::vector<std::pair<size_t, size_t>> runs;
  for (size_t b = 0; b < pairs.size();) {
    size_t e = b + 1;
    while (e < pairs.size() && pairs[e].first == pairs[b].first) ++e;
    runs.emplace_back(b, e);
    b = e;
  }
  return runs;
}

// Pairs [begin, end) that share text i: gather partner bases into chunks, one GEMM per chunk.
void compute_run(const std::vector<SocmText>& texts, const std::vector<TextPair>& pairs, size_t begin, size_t end,
                 const SocmOptions& opt, Workspace& ws, std::vector<SocmPair>& out) {
  const SocmText& a = texts[pairs[begin].first];
  const Index d = a.dim;
  const Index chunk_cols = std::max<Index>(1, Index(kChunkBytes / (sizeof(double) * size_t(std::max<Index>(d, 1)))));
  for (size_t c = begin; c < end;) {
    size_t stop = c;
    Index cols = 0;
    while (stop < end && (stop == c || cols + texts[pairs[stop].second].basis_t.cols() <= chunk_cols))
      cols += texts[pairs[stop++].second].basis_t.cols();
    // Buffers only grow: a fresh multi-megabyte allocation per chunk would cost page faults on every chunk.
    if (ws.gathered.rows() != d || ws.gathered.cols() < cols) ws.gathered.resize(d, std::max(cols, chunk_cols));
    if (ws.cross.rows() < a.basis_t.cols() || ws.cross.cols() < cols)
      ws.cross.resize(std::max(ws.cross.rows(), a.basis_t.cols()), std::max(ws.cross.cols(), cols));
    Index off = 0;
    for (size_t p = c; p < stop; ++p) {
      const MatrixXd& bt = texts[pairs[p].second].basis_t;
      ws.gathered.middleCols(off, bt.cols()) = bt;
      off += bt.cols();
    }
    auto cross = ws.cross.topLeftCorner(a.basis_t.cols(), cols);
    cross.noalias() = a.basis_t.transpose() * ws.gathered.leftCols(cols);
    off = 0;
    for (size_t p = c; p < stop; ++p) {
      const SocmText& b = texts[pairs[p].second];
      out[p] = pair_from_cross(a, b, cross.middleCols(off, b.basis_t.cols()), opt, ws);
      off += b.basis_t.cols();
    }
    c = stop;
  }
}

double mean_of(const std::vector<SocmPair>& v, double SocmPair::*field) {
  if (v.empty()) return kNaN;
  double s = 0;
  for (const auto& p : v) s += p.*field;
  return s / double(v.size());
}

std::vector<double> column_of(const std::vector<SocmPair>& v, double SocmPair::*field) {
  std::vector<double> out;
  out.reserve(v.size());
  for (const auto& p : v) out.push_back(p.*field);
  return out;
}

}  // namespace

SocmText socm_prepare(const Eigen::Ref<const MatrixXd>& tokens) {
  if (tokens.rows() == 0) throw std::invalid_argument("socm_prepare: a token list needs at least one token");
  const double n = double(tokens.rows());
  Eigen::RowVectorXd mu = tokens.colwise().mean();
  const double scale = 1.0 / (mu.norm() + kMeanEps);
  SocmText t;
  t.tokens = tokens.rows();
  t.dim = tokens.cols();
  t.mean = (mu * scale).transpose();
  MatrixXd f = (tokens.rowwise() - mu) * (scale / std::sqrt(n));  // F = Xc / sqrt(n), so Sigma = F^T F
  t.trace = f.squaredNorm();
  t.basis_t = thin_basis_t(f);
  return t;
}

SocmPair socm_pair(const SocmText& a, const SocmText& b, const SocmOptions& opt) {
  if (a.dim != b.dim) throw std::invalid_argument("socm_pair: token lists of different dimension");
  Workspace ws;
  MatrixXd m = a.basis_t.transpose() * b.basis_t;
  return pair_from_cross(a, b, m, opt, ws);
}

std::vector<TextPair> socm_pair_list(int64_t n_texts, int64_t max_pairs, uint64_t seed) {
  const uint64_t n = n_texts > 1 ? uint64_t(n_texts) : 0;
  if (n > std::numeric_limits<uint32_t>::max()) throw std::invalid_argument("socm_pair_list: too many texts");
  const uint64_t total = n > 1 ? n * (n - 1) / 2 : 0;
  std::vector<TextPair> pairs;
  if (max_pairs <= 0 || uint64_t(max_pairs) >= total) {
    pairs.reserve(total);
    for (uint32_t i = 0; i + 1 < n; ++i)
      for (uint32_t j = i + 1; j < n; ++j) pairs.emplace_back(i, j);
    return pairs;
  }
  // Floyd's sampling: k distinct indices of [0, total) in O(k) draws.
  std::mt19937_64 rng(seed);
  std::unordered_set<uint64_t> chosen;
  chosen.reserve(size_t(max_pairs) * 2);
  for (uint64_t j = total - uint64_t(max_pairs); j < total; ++j)
    if (!chosen.insert(draw_below(rng, j + 1)).second) chosen.insert(j);
  std::vector<uint64_t> linear(chosen.begin(), chosen.end());
  std::sort(linear.begin(), linear.end());
  // Linear index -> (i, j) in row-major order of the upper triangle: row i holds n - 1 - i pairs.
  pairs.reserve(linear.size());
  uint64_t i = 0, row_start = 0;
  for (uint64_t l : linear) {
    while (l >= row_start + (n - 1 - i)) row_start += n - 1 - i++;
    pairs.emplace_back(uint32_t(i), uint32_t(i + 1 + (l - row_start)));
  }
  return pairs;
}

std::vector<SocmPair> socm_pairs(const std::vector<SocmText>& texts, const std::vector<TextPair>& pairs,
                                 const SocmOptions& opt, int64_t* svd_pairs) {
  for (const auto& [i, j] : pairs)
    if (i >= texts.size() || j >= texts.size() || texts[i].dim != texts[j].dim)
      throw std::invalid_argument("socm_pairs: pair out of range or of different dimensions");
  std::vector<SocmPair> out(pairs.size());
  const auto runs = runs_by_first(pairs);
  int threads = opt.threads > 0 ? opt.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  threads = int(std::max<size_t>(1, std::min(size_t(threads), runs.size())));

  std::atomic<size_t> next{0};
  std::atomic<int64_t> svd_total{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto worker = [&] {
    Workspace ws;
    try {
      for (size_t r; (r = next.fetch_add(1)) < runs.size();)
        compute_run(texts, pairs, runs[r].first, runs[r].second, opt, ws, out);
    } catch (...) {
      std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::current_exception();
    }
    svd_total += ws.svd_pairs;
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
  if (failure) std::rethrow_exception(failure);
  if (svd_pairs) *svd_pairs = svd_total.load();
  return out;
}

Quantiles quantiles(std::vector<double> values) {
  if (values.empty()) return {kNaN, kNaN, kNaN, kNaN, kNaN};
  std::sort(values.begin(), values.end());
  auto at = [&](double p) {
    const double h = p * double(values.size() - 1);
    const size_t lo = size_t(std::floor(h));
    const size_t hi = std::min(lo + 1, values.size() - 1);
    return values[lo] + (h - double(lo)) * (values[hi] - values[lo]);
  };
  return {at(0.05), at(0.25), at(0.50), at(0.75), at(0.95)};
}

SocmSummary socm_summary(const std::vector<SocmText>& texts, const SocmOptions& opt) {
  SocmSummary s;
  s.texts = int64_t(texts.size());
  const auto pairs = socm_pair_list(s.texts, opt.max_pairs, opt.seed);
  const auto values = socm_pairs(texts, pairs, opt, &s.svd_pairs);
  s.pairs = int64_t(values.size());
  s.socm = mean_of(values, &SocmPair::socm);
  s.d_mu = mean_of(values, &SocmPair::d_mu);
  s.d_sigma = mean_of(values, &SocmPair::d_sigma);
  s.socm_q = quantiles(column_of(values, &SocmPair::socm));
  s.d_mu_q = quantiles(column_of(values, &SocmPair::d_mu));
  s.d_sigma_q = quantiles(column_of(values, &SocmPair::d_sigma));
  s.texts_over_trace = count_over_trace(texts);
  return s;
}

int64_t count_over_trace(const std::vector<SocmText>& texts) {
  return std::count_if(texts.begin(), texts.end(), [](const SocmText& t) { return t.trace > kSocmTraceLimit; });
}

SocmMeans socm_means(const std::vector<MatrixXd>& token_lists, const SocmOptions& opt) {
  std::vector<SocmText> texts;
  for (const auto& x : token_lists)
    if (x.rows() > 0) texts.push_back(socm_prepare(x));
  const auto values = socm_pairs(texts, socm_pair_list(int64_t(texts.size()), opt.max_pairs, opt.seed), opt);
  return {mean_of(values, &SocmPair::socm), mean_of(values, &SocmPair::d_mu), mean_of(values, &SocmPair::d_sigma),
          int64_t(values.size()), int64_t(texts.size()), count_over_trace(texts)};
}

}  // namespace spread
