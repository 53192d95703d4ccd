// SOCM (docs/design.md §7.3) against a brute-force d x d reference (symmetric square roots by eigendecomposition, in
// float64, the precision the accuracy target is stated in, and in long double where float64 itself is the limit),
// against a 50-digit mpmath fixture (tests/oracles/gen_socm_fixtures.py), against closed forms, and for the properties
// that section lists.
#include <gtest/gtest.h>
#include "test_paths.h"

#include <fmt/format.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <Eigen/Dense>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <set>

#include "spread/data/npy.h"
#include "spread/diagnostics/report.h"
#include "spread/diagnostics/socm.h"

namespace {

using Eigen::MatrixXd;
using spread::SocmOptions;
using spread::SocmPair;

// ---- the brute-force reference -----------------------------------------------------------------------------------

template <class S>
using Mat = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic>;

template <class S>
Mat<S> psd_sqrt(const Mat<S>& m) {
  Eigen::SelfAdjointEigenSolver<Mat<S>> es(m);
  Eigen::Matrix<S, Eigen::Dynamic, 1> root = es.eigenvalues().cwiseMax(S(0)).cwiseSqrt();
  return es.eigenvectors() * root.asDiagonal() * es.eigenvectors().transpose();
}

template <class S>
S trace_sqrt(const Mat<S>& m) {
  Eigen::SelfAdjointEigenSolver<Mat<S>> es(m, Eigen::EigenvaluesOnly);
  return es.eigenvalues().cwiseMax(S(0)).cwiseSqrt().sum();
}

// Normalised mean and biased covariance (d x d) of one list, as docs/design.md §7.3 writes them.
template <class S>
std::pair<Eigen::Matrix<S, Eigen::Dynamic, 1>, Mat<S>> mean_and_cov(const MatrixXd& x) {
  Mat<S> xs = x.cast<S>();
  Eigen::Matrix<S, Eigen::Dynamic, 1> mu = xs.colwise().mean().transpose();
  xs /= mu.norm() + S(1e-12);
  mu /= mu.norm() + S(1e-12);
  Mat<S> c = xs.rowwise() - mu.transpose();
  return {mu, c.transpose() * c / S(x.rows())};
}

// paper_eps < 0: the exact value; otherwise the reference code's algorithm with eps I (utils/distance.py).
template <class S>
SocmPair brute_force(const MatrixXd& x1, const MatrixXd& x2, double paper_eps = -1) {
  auto [mu1, sig1] = mean_and_cov<S>(x1);
  auto [mu2, sig2] = mean_and_cov<S>(x2);
  const Eigen::Index d = x1.cols();
  S t;
  if (paper_eps < 0) {
    Mat<S> root1 = psd_sqrt<S>(sig1);
    t = trace_sqrt<S>(root1 * sig2 * root1);
  } else {
    const S eps = S(paper_eps);
    Mat<S> root1 = psd_sqrt<S>(sig1 + eps * Mat<S>::Identity(d, d));
    t = trace_sqrt<S>(root1 * sig2 * root1 + eps * Mat<S>::Identity(d, d));
  }
  SocmPair p;
  p.d_mu = double((mu1 - mu2).squaredNorm() / 4);
  p.d_sigma = double(std::max(S(0), sig1.trace() + sig2.trace() - 2 * t) / 4);
  p.socm = (1 - p.d_mu) * p.d_sigma;
  return p;
}

// ---- inputs -------------------------------------------------------------------------------------------------------

struct Gen {
  std::mt19937_64 rng;
  std::normal_distribution<double> normal;
  explicit Gen(uint64_t seed) : rng(seed) {}
  MatrixXd randn(Eigen::Index r, Eigen::Index c) {
    MatrixXd m(r, c);
    for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = normal(rng);
    return m;
  }
  // n tokens around a common offset: the mean stays away from zero, as in real hidden states.
  MatrixXd list(Eigen::Index n, Eigen::Index d, double spread = 0.5) {
    MatrixXd x = randn(n, d) * spread;
    x.rowwise() += randn(1, d).row(0);
    return x;
  }
  // n tokens whose centred list has rank `rank` (n > rank gives repeated directions).
  MatrixXd low_rank(Eigen::Index n, Eigen::Index d, Eigen::Index rank, double noise = 0) {
    MatrixXd x = randn(n, rank) * randn(rank, d) * 0.4 + randn(n, d) * noise;
    x.rowwise() += randn(1, d).row(0);
    return x;
  }
};

SocmPair ours(const MatrixXd& a, const MatrixXd& b, const SocmOptions& opt = {}) {
  return spread::socm_pair(spread::socm_prepare(a), spread::socm_prepare(b), opt);
}

void expect_near_pair(const SocmPair& got, const SocmPair& want, double tol, const std::string& what) {
  EXPECT_NEAR(got.d_mu, want.d_mu, tol) << what;
  EXPECT_NEAR(got.d_sigma, want.d_sigma, tol) << what;
  EXPECT_NEAR(got.socm, want.socm, tol) << what;
}

// Both references: float64, in which the accuracy target (1e-7) is stated, and long double. Where a covariance is
// singular (n <= d, or n > rank) each reference square root of a zero eigenvalue carries about sqrt(eps * ||Sigma||):
// up to 6e-8 in total for float64 and 2e-9 for long double at these sizes (measured), while ours matches the 50-digit
// fixture to 1e-12 (MatchesTheMpmathFixturePairByPair). Full-rank pairs are held to 1e-12.
void expect_matches_brute_force(const MatrixXd& a, const MatrixXd& b, const std::string& what,
                                double long_double_tol = 1e-8) {
  const SocmPair got = ours(a, b);
  expect_near_pair(got, brute_force<double>(a, b), 1e-7, what + " vs float64 brute force");
  expect_near_pair(got, brute_force<long double>(a, b), long_double_tol, what + " vs long double brute force");
}

// numpy.percentile's default (linear), written independently of spread::quantiles.
double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const double rank = p / 100.0 * double(v.size() - 1);
  const size_t below = size_t(rank);
  if (below + 1 >= v.size()) return v.back();
  return v[below] * (1 - (rank - double(below))) + v[below + 1] * (rank - double(below));
}

const std::string kFixtures = std::string(SPREAD_TEST_DATA_DIR) + "/socm";

nlohmann::json expected_fixture() {
  std::ifstream in(kFixtures + "/expected.json");
  return nlohmann::json::parse(in);
}

std::vector<MatrixXd> fixture_lists() {
  std::vector<MatrixXd> lists;
  for (int i = 0; i < 6; ++i)
    lists.push_back(spread::read_npy_matrix(kFixtures + "/lists/t" + std::to_string(i) + ".npy"));
  return lists;
}

}  // namespace

// ---- the formula --------------------------------------------------------------------------------------------------

TEST(Socm, FormulaHasTheFivePropertiesOfTheSpec) {
  const int steps = 20;
  const double h = 1.0 / steps;
  for (int i = 0; i <= steps; ++i) {
    for (int j = 0; j <= steps; ++j) {
      const double mu = i * h, sigma = j * h, v = spread::socm_value(mu, sigma);
      // (a) the maximum 1 is reached only at d_mu = 0, d_sigma = 1.
      if (i == 0 && j == steps) EXPECT_EQ(v, 1.0);
      else EXPECT_LT(v, 1.0) << mu << " " << sigma;
      // (b) zero exactly when d_mu = 1 or d_sigma = 0.
      if (i == steps || j == 0) EXPECT_EQ(v, 0.0) << mu << " " << sigma;
      else EXPECT_GT(v, 0.0) << mu << " " << sigma;
      if (i < steps && j < steps) {
        const double v_mu = spread::socm_value(mu + h, sigma), v_sigma = spread::socm_value(mu, sigma + h);
        EXPECT_LE(v_mu, v);     // (c) non-increasing in d_mu
        EXPECT_GE(v_sigma, v);  // (d) non-decreasing in d_sigma
        // (e) the mixed difference quotient (a finite-difference d^2 SOCM / d d_mu d d_sigma) is not positive.
        EXPECT_LE(spread::socm_value(mu + h, sigma + h) - v_mu - v_sigma + v, 1e-15);
      }
    }
  }
}

TEST(Socm, IdenticalListsGiveZero) {
  Gen g(1);
  for (const MatrixXd& x : {g.list(9, 16), g.low_rank(20, 8, 3), MatrixXd(g.list(1, 8)), g.list(30, 5)}) {
    const SocmPair p = ours(x, x);
    EXPECT_EQ(p.d_mu, 0.0);
    EXPECT_NEAR(p.d_sigma, 0.0, 1e-13);
    EXPECT_NEAR(p.socm, 0.0, 1e-13);
  }
}

TEST(Socm, EqualMeansGiveSocmEqualToDSigma) {
  Gen g(2);
  MatrixXd offset = g.randn(1, 12);
  MatrixXd a = g.randn(10, 12), b = g.randn(7, 12) * 3.0;
  a.rowwise() -= a.colwise().mean();
  b.rowwise() -= b.colwise().mean();
  a.rowwise() += offset.row(0);
  b.rowwise() += offset.row(0);
  const SocmPair p = ours(a, b);
  EXPECT_NEAR(p.d_mu, 0.0, 1e-15);
  EXPECT_GT(p.d_sigma, 0.1);
  EXPECT_NEAR(p.socm, p.d_sigma, 1e-14);
}

TEST(Socm, InvariantToScalingEitherList) {
  Gen g(3);
  const MatrixXd a = g.list(11, 20), b = g.low_rank(15, 20, 4);
  const SocmPair base = ours(a, b);
  for (double s : {0.37, 41.0}) {
    expect_near_pair(ours(a * s, b), base, 1e-11, "first scaled by " + std::to_string(s));
    expect_near_pair(ours(a, b * s), base, 1e-11, "second scaled by " + std::to_string(s));
  }
}

TEST(Socm, SymmetricInThePair) {
  Gen g(4);
  for (int trial = 0; trial < 10; ++trial) {
    const MatrixXd a = g.list(3 + trial, 16), b = g.low_rank(25 - trial, 16, 2 + trial % 5);
    expect_near_pair(ours(a, b), ours(b, a), 1e-12, "trial " + std::to_string(trial));
  }
}

TEST(Socm, InUnitIntervalWhenTracesAtMostTwo) {
  Gen g(5);
  for (int trial = 0; trial < 50; ++trial) {
    const MatrixXd a = g.list(2 + trial % 13, 24, 0.1 + 0.01 * trial), b = g.list(1 + trial % 7, 24, 0.2);
    ASSERT_LE(spread::socm_prepare(a).trace, 2.0);
    ASSERT_LE(spread::socm_prepare(b).trace, 2.0);
    const SocmPair p = ours(a, b);
    for (double v : {p.d_mu, p.d_sigma, p.socm}) {
      EXPECT_GE(v, 0.0);
      EXPECT_LE(v, 1.0);
    }
  }
}

// ---- against the brute-force d x d reference ----------------------------------------------------------------------

TEST(Socm, EqualsBruteForceOnRandomLists) {
  Gen g(6);
  const std::array<std::array<int, 3>, 8> shapes{{{5, 7, 16}, {12, 12, 8}, {30, 4, 10}, {2, 3, 24},
                                                  {40, 33, 6}, {9, 20, 20}, {3, 3, 2}, {17, 1, 12}}};
  for (const auto& [n1, n2, d] : shapes) {
    const double tol = n1 > d && n2 > d ? 1e-12 : 1e-8;  // full rank: nothing limits the reference
    for (double spread : {0.1, 1.0, 3.0})
      expect_matches_brute_force(g.list(n1, d, spread), g.list(n2, d, spread),
                                 fmt::format("n1={} n2={} d={} spread={}", n1, n2, d, spread), tol);
  }
}

TEST(Socm, EqualsBruteForceOnRankDeficientLists) {
  Gen g(7);
  // n < d (rank n - 1 after centring), n > rank (repeated directions), and nearly rank-deficient lists whose
  // smallest directions are 1e-9 of the rest (these reach the BDCSVD fallback).
  expect_matches_brute_force(g.list(4, 20), g.list(6, 20), "n < d");
  expect_matches_brute_force(g.low_rank(20, 12, 3), g.low_rank(15, 12, 2), "n > rank");
  expect_matches_brute_force(g.low_rank(20, 12, 3), g.list(9, 12), "n > rank against full");
  expect_matches_brute_force(g.low_rank(20, 12, 3, 1e-9), g.low_rank(18, 12, 4, 1e-9), "nearly rank-deficient");
  // Two lists in orthogonal subspaces: the cross matrix is exactly zero.
  MatrixXd a = MatrixXd::Zero(6, 10), b = MatrixXd::Zero(5, 10);
  a.leftCols(4) = g.randn(6, 4);
  b.rightCols(4) = g.randn(5, 4);
  a.col(4).setConstant(1.0);
  b.col(4).setConstant(1.0);
  expect_matches_brute_force(a, b, "orthogonal spans");
  // Partly overlapping spans: some singular values of the cross matrix are zero, others are not.
  MatrixXd c = MatrixXd::Zero(8, 10);
  c.leftCols(6) = g.randn(8, 6);
  c.col(6).setConstant(2.0);
  a.col(4).setConstant(2.0);
  expect_matches_brute_force(a, c, "partly overlapping spans");
}

TEST(Socm, EqualsBruteForceOnIllConditionedLists) {
  // Full rank, but the token spread per direction falls from 1 to 1e-7: no direction may be dropped as noise.
  Gen g(18);
  auto graded = [&](Eigen::Index n, Eigen::Index d) {
    Eigen::VectorXd scale(d);
    for (Eigen::Index k = 0; k < d; ++k) scale(k) = std::pow(10.0, -7.0 * double(k) / double(d - 1));
    MatrixXd rotation = Eigen::HouseholderQR<MatrixXd>(g.randn(d, d)).householderQ();
    MatrixXd x = g.randn(n, d) * scale.asDiagonal() * rotation.transpose();
    x.rowwise() += g.randn(1, d).row(0);
    return x;
  };
  expect_matches_brute_force(graded(30, 12), graded(25, 12), "graded against graded", 1e-10);
  expect_matches_brute_force(graded(30, 12), g.list(20, 12), "graded against a plain list", 1e-10);
}

TEST(Socm, EqualsBruteForceOnSingleTokenAndDuplicatedTexts) {
  Gen g(8);
  const MatrixXd one = g.list(1, 9), other = g.list(1, 9), x = g.list(7, 9);
  expect_matches_brute_force(one, x, "single token against a list");
  expect_matches_brute_force(x, one, "a list against a single token");
  expect_matches_brute_force(one, other, "two single tokens");
  MatrixXd doubled(14, 9);
  doubled << x, x;  // every token twice: same mean and covariance as x
  expect_matches_brute_force(x, doubled, "duplicated tokens");
  expect_matches_brute_force(x, 3.0 * x, "scaled duplicate");
}

TEST(Socm, MatchesTheMpmathFixturePairByPair) {
  const auto want = expected_fixture();
  const auto lists = fixture_lists();
  for (const auto& p : want["pairs"]) {
    const int i = p["i"], j = p["j"];
    const SocmPair got = ours(lists[size_t(i)], lists[size_t(j)]);
    const std::string what = fmt::format("pair ({}, {})", i, j);
    expect_near_pair(got, {p["d_mu"], p["d_sigma"], p["socm"]}, 1e-12, what);
    SocmOptions paper;
    paper.paper_compatible = true;
    const SocmPair got_paper = ours(lists[size_t(i)], lists[size_t(j)], paper);
    EXPECT_NEAR(got_paper.d_sigma, p["d_sigma_paper"].get<double>(), 1e-12) << what;
    EXPECT_NEAR(got_paper.socm, p["socm_paper"].get<double>(), 1e-12) << what;
  }
}

TEST(Socm, SvdSolverAgreesWithTheDefault) {
  Gen g(9);
  const MatrixXd rotation = Eigen::HouseholderQR<MatrixXd>(g.randn(30, 30)).householderQ();
  std::vector<spread::SocmText> texts;
  for (int i = 0; i < 12; ++i) {
    if (i % 4 == 3) {  // in general position: well-conditioned cross matrices, the Gram path
      texts.push_back(spread::socm_prepare(g.list(12, 30)));
      continue;
    }
    // Rank 8 in the coordinate window [2i, 2i + 8) of a rotated basis: neighbouring texts share 2-6 directions,
    // so their cross matrices have exact zero singular values among nonzero ones (the BDCSVD fallback).
    MatrixXd x = MatrixXd::Zero(10 + i, 30);
    x.middleCols(2 * i, 8) = g.randn(10 + i, 8);
    x.col(29).array() += 1.0;  // the mean, outside every window
    texts.push_back(spread::socm_prepare(x * rotation.transpose()));
  }
  const auto pairs = spread::socm_pair_list(int64_t(texts.size()), 0, 0);
  SocmOptions svd;
  svd.solver = spread::SocmSolver::kSvd;
  int64_t fallbacks = 0;
  const auto fast = spread::socm_pairs(texts, pairs, {}, &fallbacks);
  const auto slow = spread::socm_pairs(texts, pairs, svd);
  EXPECT_GT(fallbacks, 0);
  EXPECT_LT(fallbacks, int64_t(pairs.size()));
  for (size_t k = 0; k < pairs.size(); ++k) expect_near_pair(fast[k], slow[k], 1e-12, fmt::format("pair {}", k));
}

TEST(Socm, DefaultSolverAgreesWithTheSvdOnBothSidesOfTheLaneWidth) {
  // Gram sizes from 2 to 159: pairs of short texts go through the lanes (kLanes at a time), pairs of long ones one
  // at a time; every pair against its own BDCSVD.
  Gen g(21);
  std::vector<spread::SocmText> texts;
  for (int tokens : {3, 40, 64, 100, 120, 129, 130, 150, 160, 60, 140, 128})
    texts.push_back(spread::socm_prepare(g.list(tokens, 200)));
  const auto pairs = spread::socm_pair_list(int64_t(texts.size()), 0, 0);
  SocmOptions svd;
  svd.solver = spread::SocmSolver::kSvd;
  const auto fast = spread::socm_pairs(texts, pairs), slow = spread::socm_pairs(texts, pairs, svd);
  for (size_t k = 0; k < pairs.size(); ++k)
    expect_near_pair(fast[k], slow[k], 1e-12, fmt::format("pair {} ({}, {})", k, pairs[k].first, pairs[k].second));
}

// ---- paper_compatible ---------------------------------------------------------------------------------------------

// Tokens mu +- sqrt(m var_k) e_k (two per direction with var_k > 0, m such directions), all rotated by R: mean R mu
// and covariance R diag(var) R^T. For two such lists with one R both values have closed forms:
//   exact:                  tr((A^1/2 B A^1/2)^1/2) = sum_k sqrt(a_k b_k)
//   paper (reference code): tr((S B S + eps I)^1/2) = sum_k sqrt((a_k + eps) b_k + eps),  S = (A + eps I)^1/2
// Partly overlapping supports make the cross matrix rank-deficient, where square roots of Gram eigenvalues fail.
MatrixXd diagonal_tokens(const std::vector<double>& var, const MatrixXd& rotation) {
  const Eigen::Index d = rotation.rows();
  int m = 0;
  for (double v : var) m += v > 0;
  MatrixXd x = MatrixXd::Zero(2 * m, d);
  int row = 0;
  for (Eigen::Index k = 0; k < d; ++k) {
    if (var[size_t(k)] == 0) continue;
    for (double sign : {1.0, -1.0}) {
      x(row, d - 1) = 1.0;  // mu = e_d, so ||mu|| = 1 and the normalisation leaves the list as it is
      x(row++, k) = sign * std::sqrt(m * var[size_t(k)]);
    }
  }
  return x * rotation.transpose();
}

struct DiagonalCase {
  std::vector<double> a, b;
};

const std::vector<DiagonalCase> kDiagonalCases = {
    {{0.5, 0.3, 0, 0, 0.1, 0, 0, 0}, {0, 0, 0.2, 0.4, 0.1, 0, 0, 0}},      // one shared direction
    {{0.5, 0.3, 0.2, 0.1, 0, 0, 0, 0}, {0, 0, 0.1, 0.4, 0.3, 0.2, 0, 0}},  // two shared, unequal variances
    {{0.2, 0.2, 0.2, 0, 0, 0, 0, 0}, {0, 0, 0, 0.3, 0.3, 0, 0, 0}},        // disjoint: zero cross matrix
    {{0.7, 0.1, 0.05, 0.05, 0, 0, 0, 0}, {0.7, 0.1, 0.05, 0.05, 0, 0, 0, 0}}};  // the same covariance

TEST(Socm, EqualsTheClosedFormOnRotatedDiagonalCovariances) {
  Gen g(16);
  const MatrixXd rotation = Eigen::HouseholderQR<MatrixXd>(g.randn(8, 8)).householderQ();
  for (size_t c = 0; c < kDiagonalCases.size(); ++c) {
    const auto& [a, b] = kDiagonalCases[c];
    double tr_a = 0, tr_b = 0, root = 0;
    for (size_t k = 0; k < a.size(); ++k) {
      tr_a += a[k];
      tr_b += b[k];
      root += std::sqrt(a[k] * b[k]);
    }
    // The 1e-12 of the normalisation scales covariances by (1 + 1e-12)^-2: below this tolerance.
    const SocmPair p = ours(diagonal_tokens(a, rotation), diagonal_tokens(b, rotation));
    EXPECT_NEAR(p.d_mu, 0.0, 1e-15) << "case " << c;
    EXPECT_NEAR(p.d_sigma, (tr_a + tr_b - 2 * root) / 4, 1e-11) << "case " << c;
  }
}

TEST(Socm, PaperCompatibleMatchesTheClosedFormOnRotatedDiagonalCovariances) {
  Gen g(17);
  const double eps = 1e-9;
  const MatrixXd rotation = Eigen::HouseholderQR<MatrixXd>(g.randn(8, 8)).householderQ();
  SocmOptions paper;
  paper.paper_compatible = true;
  for (size_t c = 0; c < kDiagonalCases.size(); ++c) {
    const auto& [a, b] = kDiagonalCases[c];
    double tr_a = 0, tr_b = 0, exact_root = 0, paper_root = 0;
    for (size_t k = 0; k < a.size(); ++k) {
      tr_a += a[k];
      tr_b += b[k];
      exact_root += std::sqrt(a[k] * b[k]);
      paper_root += std::sqrt((a[k] + eps) * b[k] + eps);
    }
    const SocmPair p = ours(diagonal_tokens(a, rotation), diagonal_tokens(b, rotation), paper);
    const SocmPair e = ours(diagonal_tokens(a, rotation), diagonal_tokens(b, rotation));
    EXPECT_NEAR(p.d_sigma, std::max(0.0, tr_a + tr_b - 2 * paper_root) / 4, 1e-11) << "case " << c;
    if (c + 1 < kDiagonalCases.size()) {  // the offset is visible at this size unless the clamp at 0 hides it
      EXPECT_NEAR(e.d_sigma - p.d_sigma, (paper_root - exact_root) / 2, 1e-11) << "case " << c;
      EXPECT_GT(e.d_sigma - p.d_sigma, 1e-5) << "case " << c;
    }
  }
}

TEST(Socm, PaperCompatibleMatchesTheReferenceAlgorithm) {
  Gen g(10);
  SocmOptions paper;
  paper.paper_compatible = true;
  const std::vector<std::pair<MatrixXd, MatrixXd>> cases = {
      {g.list(6, 14), g.list(9, 14)},     {g.low_rank(20, 10, 3), g.list(4, 10)},
      {g.list(1, 12), g.list(8, 12)},     {g.list(8, 12), g.list(1, 12)},
      {g.list(30, 6, 2.0), g.list(25, 6)}};
  for (size_t k = 0; k < cases.size(); ++k) {
    const auto& [a, b] = cases[k];
    const SocmPair got = ours(a, b, paper);
    expect_near_pair(got, brute_force<long double>(a, b, 1e-9), 1e-10, fmt::format("case {}", k));
    EXPECT_LE(got.d_sigma, ours(a, b).d_sigma + 1e-15) << "case " << k;  // eps I only lowers d_sigma
  }
}

// A single-token second text has Sigma2 = 0, so the reference code's square root is sqrt(eps I) and
// d_sigma = (tr Sigma1 - 2 d sqrt(eps)) / 4; at d = 768 the offset is 768 sqrt(1e-9) / 2 = 0.0121
// (docs/design.md §7.3: "lowers d_sigma by about 0.012 at d=768").
TEST(Socm, PaperCompatibleOffsetAtBertWidth) {
  Gen g(11);
  const MatrixXd a = g.list(40, 768, 0.05), b = g.list(1, 768);
  SocmOptions paper;
  paper.paper_compatible = true;
  const double tr = spread::socm_prepare(a).trace;
  EXPECT_NEAR(ours(a, b).d_sigma, tr / 4, 1e-14);
  EXPECT_NEAR(ours(a, b, paper).d_sigma, std::max(0.0, tr - 2 * 768 * std::sqrt(1e-9)) / 4, 1e-14);
}

// ---- sets of texts ------------------------------------------------------------------------------------------------

TEST(Socm, SummaryOverAllPairsMatchesBruteForce) {
  Gen g(12);
  std::vector<MatrixXd> lists = {g.list(5, 10), g.list(12, 10, 1.5), g.low_rank(14, 10, 2), g.list(1, 10),
                                 g.list(8, 10, 0.2), g.list(3, 10), g.list(20, 10, 0.7)};
  std::vector<spread::SocmText> texts;
  for (const auto& x : lists) texts.push_back(spread::socm_prepare(x));
  const auto s = spread::socm_summary(texts);
  std::vector<double> socm, d_mu, d_sigma;
  for (size_t i = 0; i < lists.size(); ++i)
    for (size_t j = i + 1; j < lists.size(); ++j) {
      const SocmPair p = brute_force<long double>(lists[i], lists[j]);
      socm.push_back(p.socm);
      d_mu.push_back(p.d_mu);
      d_sigma.push_back(p.d_sigma);
    }
  auto mean = [](const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / double(v.size()); };
  const double tol = 5e-9;  // the long double reference's own error on singular covariances (see above)
  EXPECT_EQ(s.texts, 7);
  EXPECT_EQ(s.pairs, 21);
  EXPECT_NEAR(s.socm, mean(socm), tol);
  EXPECT_NEAR(s.d_mu, mean(d_mu), tol);
  EXPECT_NEAR(s.d_sigma, mean(d_sigma), tol);
  const std::array<std::pair<double, double spread::Quantiles::*>, 5> ps{
      {{5, &spread::Quantiles::p05}, {25, &spread::Quantiles::p25}, {50, &spread::Quantiles::p50},
       {75, &spread::Quantiles::p75}, {95, &spread::Quantiles::p95}}};
  for (const auto& [pct, field] : ps) {
    EXPECT_NEAR(s.socm_q.*field, percentile(socm, pct), tol) << pct;
    EXPECT_NEAR(s.d_mu_q.*field, percentile(d_mu, pct), tol) << pct;
    EXPECT_NEAR(s.d_sigma_q.*field, percentile(d_sigma, pct), tol) << pct;
  }
}

TEST(Socm, QuantilesInterpolateLinearlyBetweenOrderStatistics) {
  // Hand-computed with numpy.percentile: rank = p (n - 1), here n = 5.
  const auto q = spread::quantiles({5, 1, 4, 2, 3});
  EXPECT_DOUBLE_EQ(q.p05, 1.2);
  EXPECT_DOUBLE_EQ(q.p25, 2.0);
  EXPECT_DOUBLE_EQ(q.p50, 3.0);
  EXPECT_DOUBLE_EQ(q.p75, 4.0);
  EXPECT_DOUBLE_EQ(q.p95, 4.8);
  EXPECT_TRUE(std::isnan(spread::quantiles({}).p50));
}

TEST(Socm, PairSampleIsSeededDistinctAndSorted) {
  const auto a = spread::socm_pair_list(50, 300, 7), b = spread::socm_pair_list(50, 300, 7);
  const auto c = spread::socm_pair_list(50, 300, 8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  ASSERT_EQ(a.size(), 300u);
  std::set<spread::TextPair> distinct(a.begin(), a.end());
  EXPECT_EQ(distinct.size(), 300u);
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  for (const auto& [i, j] : a) {
    EXPECT_LT(i, j);
    EXPECT_LT(j, 50u);
  }
  // Pairs of every row appear: the sample is spread over the triangle, not the first rows only.
  std::set<uint32_t> firsts;
  for (const auto& p : a) firsts.insert(p.first);
  EXPECT_GT(firsts.size(), 35u);
  // Asking for at least all pairs gives all pairs, in order.
  const auto all = spread::socm_pair_list(6, 15, 1);
  ASSERT_EQ(all.size(), 15u);
  EXPECT_EQ(all.front(), spread::TextPair(0, 1));
  EXPECT_EQ(all.back(), spread::TextPair(4, 5));
  EXPECT_EQ(spread::socm_pair_list(6, 0, 1), all);
  EXPECT_TRUE(spread::socm_pair_list(1, 0, 1).empty());
}

TEST(Socm, SampledSummaryAveragesTheSampledPairs) {
  Gen g(13);
  std::vector<spread::SocmText> texts;
  for (int i = 0; i < 15; ++i) texts.push_back(spread::socm_prepare(g.list(3 + i, 8)));
  SocmOptions opt;
  opt.max_pairs = 20;
  opt.seed = 99;
  const auto s = spread::socm_summary(texts, opt);
  double sum = 0;
  for (const auto& [i, j] : spread::socm_pair_list(15, 20, 99)) sum += spread::socm_pair(texts[i], texts[j]).socm;
  EXPECT_EQ(s.pairs, 20);
  EXPECT_NEAR(s.socm, sum / 20, 1e-14);
}

TEST(Socm, ResultsDoNotDependOnTheThreadCount) {
  Gen g(14);
  std::vector<spread::SocmText> texts;
  for (int i = 0; i < 25; ++i) texts.push_back(spread::socm_prepare(g.list(1 + (i * 7) % 30, 40)));
  const auto pairs = spread::socm_pair_list(25, 0, 0);
  SocmOptions one, three;
  one.threads = 1;
  three.threads = 3;
  const auto a = spread::socm_pairs(texts, pairs, one), b = spread::socm_pairs(texts, pairs, three);
  for (size_t k = 0; k < pairs.size(); ++k) {
    EXPECT_EQ(a[k].socm, b[k].socm);
    EXPECT_EQ(a[k].d_sigma, b[k].d_sigma);
  }
  // Each pair also equals its single-pair computation.
  for (size_t k = 0; k < pairs.size(); k += 17)
    expect_near_pair(a[k], spread::socm_pair(texts[pairs[k].first], texts[pairs[k].second]), 1e-13, "pair");
}

TEST(Socm, TrainerMeansMatchBruteForceAndSkipEmptyLists) {
  Gen g(15);
  std::vector<MatrixXd> probe = {g.list(16, 12), g.list(16, 12), MatrixXd(0, 12), g.list(16, 12, 2.0)};
  const auto m = spread::socm_means(probe);
  double socm = 0, d_mu = 0, d_sigma = 0;
  for (auto [i, j] : std::vector<std::pair<int, int>>{{0, 1}, {0, 3}, {1, 3}}) {
    const SocmPair p = brute_force<long double>(probe[size_t(i)], probe[size_t(j)]);
    socm += p.socm / 3;
    d_mu += p.d_mu / 3;
    d_sigma += p.d_sigma / 3;
  }
  EXPECT_EQ(m.pairs, 3);
  EXPECT_NEAR(m.socm, socm, 1e-10);
  EXPECT_NEAR(m.d_mu, d_mu, 1e-10);
  EXPECT_NEAR(m.d_sigma, d_sigma, 1e-10);
  const auto none = spread::socm_means({g.list(4, 12)});
  EXPECT_EQ(none.pairs, 0);
  EXPECT_TRUE(std::isnan(none.socm));
}

// ---- the blocked all-pairs path ----------------------------------------------------------------------------------

// An independent float64 reference for the blocked path: per pair, the n1 x n2 cross matrix Xc1 Xc2^T / sqrt(n1 n2)
// of the centred, normalised lists, its singular values by one-sided Jacobi (no thin basis, no Gram matrix, no GEMM
// tiling), and the traces as squared Frobenius norms (docs/design.md §7.3).
SocmPair jacobi_reference(const MatrixXd& x1, const MatrixXd& x2) {
  auto centred = [](const MatrixXd& x, Eigen::VectorXd& mean) {
    Eigen::RowVectorXd mu = x.colwise().mean();
    const double scale = 1.0 / (mu.norm() + 1e-12);
    mean = (mu * scale).transpose();
    return MatrixXd((x.rowwise() - mu) * (scale / std::sqrt(double(x.rows()))));
  };
  Eigen::VectorXd mu1, mu2;
  const MatrixXd f1 = centred(x1, mu1), f2 = centred(x2, mu2);
  const double nuclear = Eigen::JacobiSVD<MatrixXd>(f1 * f2.transpose()).singularValues().sum();
  SocmPair p;
  p.d_mu = (mu1 - mu2).squaredNorm() / 4;
  p.d_sigma = std::max(0.0, f1.squaredNorm() + f2.squaredNorm() - 2 * nuclear) / 4;
  p.socm = (1 - p.d_mu) * p.d_sigma;
  return p;
}

// Lists of 1..40 tokens at one width: fewer and more tokens than the width, rank-deficient ones (rank 3 among
// many tokens, repeated tokens) and a duplicated text.
std::vector<MatrixXd> mixed_lists(Gen& g, Eigen::Index d, int count) {
  std::vector<MatrixXd> lists;
  for (int i = 0; i < count; ++i) {
    const Eigen::Index n = 1 + (i * 13) % 40;
    if (i % 5 == 2) lists.push_back(g.low_rank(n + 6, d, std::min<Eigen::Index>(3, d)));
    else if (i % 7 == 4) lists.push_back(MatrixXd(g.list(4, d)).replicate(3, 1));  // 12 tokens, 4 distinct
    else lists.push_back(g.list(n, d, 0.3 + 0.1 * (i % 4)));
  }
  lists.push_back(lists[1]);
  return lists;
}

TEST(Socm, BlockedPairsEqualAJacobiSvdOfEachCrossMatrix) {
  Gen g(31);
  for (const Eigen::Index d : {3, 17, 72}) {
    const auto lists = mixed_lists(g, d, 24);
    std::vector<spread::SocmText> texts;
    for (const auto& x : lists) texts.push_back(spread::socm_prepare(x));
    // Small tiles, so that rows and partner columns are split into several blocks and chunks; all pairs take the
    // dense blocks, a sample of 40 pairs the gathered runs.
    for (const int64_t sample : {int64_t(0), int64_t(40)}) {
      SocmOptions opt;
      opt.block_rows = 30;
      opt.chunk_columns = 45;
      opt.threads = 2;
      const auto pairs = spread::socm_pair_list(int64_t(texts.size()), sample, 5);
      const auto got = spread::socm_pairs(texts, pairs, opt);
      const auto by_default_tiles = spread::socm_pairs(texts, pairs);
      ASSERT_EQ(got.size(), pairs.size());
      for (size_t k = 0; k < pairs.size(); ++k) {
        const auto [i, j] = pairs[k];
        const std::string what = fmt::format("d={} sample={} pair ({}, {})", d, sample, i, j);
        expect_near_pair(got[k], jacobi_reference(lists[i], lists[j]), 1e-12, what);
        expect_near_pair(by_default_tiles[k], got[k], 1e-13, what + " default tiles");
      }
    }
  }
}

// ---- the report and the CLI ---------------------------------------------------------------------------------------

namespace {

void expect_summary(const nlohmann::json& got, const nlohmann::json& want, double tol, const std::string& what) {
  for (const char* key : {"mean", "p05", "p25", "p50", "p75", "p95"})
    EXPECT_NEAR(got[key].get<double>(), want[key].get<double>(), tol) << what << " " << key;
}

void expect_layer_matches_fixture(const nlohmann::json& layer, const nlohmann::json& want) {
  EXPECT_TRUE(layer["layer"].is_null());
  EXPECT_EQ(layer["texts"], 6);
  EXPECT_EQ(layer["pairs"], 15);
  EXPECT_NEAR(layer["tokens_mean"].get<double>(), want["tokens_mean"].get<double>(), 1e-12);
  expect_summary(layer["socm"], want["socm"], 1e-12, "socm");
  expect_summary(layer["d_mu"], want["d_mu"], 1e-12, "d_mu");
  expect_summary(layer["d_sigma"], want["d_sigma"], 1e-12, "d_sigma");
  EXPECT_NEAR(layer["mean_cos_incl"].get<double>(), want["mean_cos_incl"].get<double>(), 1e-12);
  EXPECT_NEAR(layer["mean_cos_excl"].get<double>(), want["mean_cos_excl"].get<double>(), 1e-12);
  EXPECT_NEAR(layer["concentration"].get<double>(), want["concentration"].get<double>(), 1e-10);
}

struct Command {
  int rc = -1;
  std::string out;
};

Command run_command(const std::string& cmd) {
  Command r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf;
  for (size_t n; (n = fread(buf.data(), 1, buf.size(), pipe)) > 0;) r.out.append(buf.data(), n);
  const int status = pclose(pipe);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::filesystem::path scratch_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / fmt::format("spread_socm_{}_{}", name, ::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace

TEST(SocmReport, DiagnoseLayerMatchesTheFixture) {
  spread::DiagnoseReport report;
  report.source_kind = "token_lists";
  report.source = kFixtures + "/lists";
  report.layers.push_back(spread::diagnose_layer(-1, fixture_lists(), {}));
  expect_layer_matches_fixture(spread::report_json(report)["layers"][0], expected_fixture());
  const std::string table = spread::format_report(report);
  EXPECT_NE(table.find("d_sigma p05 / p50 / p95"), std::string::npos) << table;
  EXPECT_NE(table.find(fmt::format("{:.4f}", expected_fixture()["socm"]["mean"].get<double>())), std::string::npos)
      << table;
}

TEST(SocmReport, BatchListsKeepOnlyValidTokens) {
  torch::Tensor hidden = torch::arange(2 * 3 * 4, torch::kFloat32).view({2, 3, 4});
  torch::Tensor mask = torch::tensor({1, 1, 0, 1, 0, 1}, torch::kBool).view({2, 3});
  const auto lists = spread::token_lists_from_batch(hidden, mask);
  ASSERT_EQ(lists.size(), 2u);
  ASSERT_EQ(lists[0].rows(), 2);
  ASSERT_EQ(lists[1].rows(), 2);
  EXPECT_EQ(lists[0](1, 3), 7.0);   // sequence 0, token 1, feature 3
  EXPECT_EQ(lists[1](1, 0), 20.0);  // sequence 1, token 2 (token 1 is masked), feature 0
}

TEST(SocmCli, TokenListsReportMatchesTheMpmathFixture) {
  const auto dir = scratch_dir("cli");
  const auto out = dir / "report.json", paper_out = dir / "paper.json";
  auto r = run_command(fmt::format("'{}' diagnose --token-lists '{}' --threads 2 --out '{}' 2>&1", SPREAD_BINARY,
                                   kFixtures + "/lists", out.string()));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("socm"), std::string::npos) << r.out;
  std::ifstream in(out);
  const auto report = nlohmann::json::parse(in);
  EXPECT_EQ(report["source"]["kind"], "token_lists");
  EXPECT_EQ(report["options"]["pairs"], "all");
  expect_layer_matches_fixture(report["layers"][0], expected_fixture());

  r = run_command(fmt::format("'{}' diagnose --token-lists '{}' --paper-compatible --out '{}' 2>&1", SPREAD_BINARY,
                              kFixtures + "/lists", paper_out.string()));
  ASSERT_EQ(r.rc, 0) << r.out;
  std::ifstream paper_in(paper_out);
  const auto paper = nlohmann::json::parse(paper_in);
  EXPECT_NEAR(paper["layers"][0]["socm"]["mean"].get<double>(),
              expected_fixture()["paper"]["socm_mean"].get<double>(), 1e-12);
  EXPECT_NEAR(paper["layers"][0]["d_sigma"]["mean"].get<double>(),
              expected_fixture()["paper"]["d_sigma_mean"].get<double>(), 1e-12);
  std::filesystem::remove_all(dir);
}

TEST(SocmCli, RejectsBadInputWithExitCode2NamingTheFile) {
  const auto dir = scratch_dir("bad");
  std::filesystem::copy_file(kFixtures + "/lists/t0.npy", dir / "a.npy");
  std::filesystem::copy_file(kFixtures + "/npy/bad_fortran.npy", dir / "b.npy");
  auto r = run_command(fmt::format("'{}' diagnose --token-lists '{}' 2>&1", SPREAD_BINARY, dir.string()));
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find((dir / "b.npy").string()), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Fortran order"), std::string::npos) << r.out;

  std::filesystem::remove(dir / "b.npy");  // one text is not enough
  r = run_command(fmt::format("'{}' diagnose --token-lists '{}' 2>&1", SPREAD_BINARY, dir.string()));
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("at least two texts"), std::string::npos) << r.out;

  std::filesystem::copy_file(kFixtures + "/lists/t0.npy", dir / "c.npy");
  r = run_command(fmt::format("'{}' diagnose --token-lists '{}' --pairs some 2>&1", SPREAD_BINARY, dir.string()));
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("--pairs"), std::string::npos) << r.out;
  std::filesystem::remove_all(dir);
}

TEST(Socm, TextsOutsideTheTraceRangeAreCountedAndFlagged) {
  // Wide: rows (1,0), (-1,0), (0,1): mu = (0, 1/3); divided by ||mu|| the deviations are (3,-1), (-3,-1), (0,2), so
  // tr Sigma = (10 + 10 + 4) / 3 = 8 > 2. Narrow: rows (1, 0.1), (1, -0.1): tr Sigma = 0.01.
  MatrixXd wide(3, 2), narrow(2, 2);
  wide << 1, 0, -1, 0, 0, 1;
  narrow << 1, 0.1, 1, -0.1;
  EXPECT_NEAR(spread::socm_prepare(wide).trace, 8.0, 1e-9);
  EXPECT_NEAR(spread::socm_prepare(narrow).trace, 0.01, 1e-9);
  EXPECT_EQ(spread::count_over_trace({spread::socm_prepare(wide), spread::socm_prepare(narrow)}), 1);
  EXPECT_EQ(spread::socm_means({wide, narrow, narrow}).texts_over_trace, 1);
  spread::DiagnoseReport report;
  report.source_kind = "token_lists";
  report.layers.push_back(spread::diagnose_layer(3, {wide, narrow, narrow}, {}));
  EXPECT_EQ(report.layers[0].socm.texts_over_trace, 1);
  const std::string table = spread::format_report(report);
  EXPECT_NE(table.find("warning: layer 3: 1 of 3 texts have tr Sigma > 2"), std::string::npos) << table;
  EXPECT_EQ(spread::report_json(report)["layers"][0]["texts_over_trace"], 1);
  report.layers[0] = spread::diagnose_layer(3, {narrow, narrow}, {});
  EXPECT_EQ(spread::format_report(report).find("warning"), std::string::npos);
}

// The cross-text mean cosine of diagnose's layer report: with 11 pairs of tokens from different texts (fewer than
// the 4096 sampled), the exact mean over all of them, worked out here pair by pair.
TEST(SocmReport, BatchMeanCosIsTheMeanCosineOverTokenPairsOfDifferentTexts) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal;
  std::vector<Eigen::MatrixXd> lists;
  for (int n : {2, 3, 1}) lists.push_back(Eigen::MatrixXd::NullaryExpr(n, 4, [&] { return normal(rng); }));
  double sum = 0;
  int pairs = 0;
  for (size_t a = 0; a < lists.size(); ++a)
    for (size_t b = a + 1; b < lists.size(); ++b)
      for (int i = 0; i < lists[a].rows(); ++i)
        for (int j = 0; j < lists[b].rows(); ++j) {
          sum += lists[a].row(i).dot(lists[b].row(j)) / (lists[a].row(i).norm() * lists[b].row(j).norm());
          ++pairs;
        }
  ASSERT_EQ(pairs, 11);
  const spread::LayerReport r = spread::diagnose_layer(1, lists, {});
  EXPECT_NEAR(r.batch_mean_cos, sum / pairs, 1e-12);
  EXPECT_TRUE(std::isnan(spread::diagnose_layer(1, {lists[0]}, {}).batch_mean_cos));
}
