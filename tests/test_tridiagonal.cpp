// Eigenvalues of symmetric tridiagonal matrices (SOCM's per-pair step) against the closed form of the Toeplitz case
// and against Eigen's dense solver, on random, graded, split, repeated and badly scaled matrices.
#include "spread/diagnostics/tridiagonal.h"

#include <Eigen/Eigenvalues>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace spread {
namespace {

struct Tridiagonal {
  std::vector<double> diag, off;
};

// Eigenvalues in ascending order, from tridiagonal_eigenvalues (which must converge).
std::vector<double> solved(Tridiagonal t) {
  EXPECT_TRUE(tridiagonal_eigenvalues(t.diag.data(), t.off.data(), int64_t(t.diag.size())));
  std::sort(t.diag.begin(), t.diag.end());
  return t.diag;
}

std::vector<double> dense_reference(const Tridiagonal& t) {
  const auto n = Eigen::Index(t.diag.size());
  Eigen::MatrixXd a = Eigen::MatrixXd::Zero(n, n);
  for (Eigen::Index i = 0; i < n; ++i) a(i, i) = t.diag[size_t(i)];
  for (Eigen::Index i = 0; i + 1 < n; ++i) a(i + 1, i) = a(i, i + 1) = t.off[size_t(i)];
  Eigen::VectorXd ev = Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(a, Eigen::EigenvaluesOnly).eigenvalues();
  return {ev.data(), ev.data() + n};
}

// Largest difference relative to the largest eigenvalue magnitude (the accuracy a backward-stable method gives).
double relative_gap(const std::vector<double>& got, const std::vector<double>& want) {
  double scale = 0, gap = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::abs(want[i]));
    gap = std::max(gap, std::abs(got[i] - want[i]));
  }
  return scale > 0 ? gap / scale : gap;
}

TEST(Tridiagonal, ToeplitzMatchesTheClosedForm) {
  // diag a, off b: lambda_k = a + 2 b cos(k pi / (n + 1)), k = 1..n
  for (const auto& [a, b] : std::vector<std::pair<double, double>>{{2.0, -1.0}, {0.0, 1.0}, {-3.0, 0.25}, {1e-3, 5.0}})
    for (int n : {1, 2, 3, 4, 7, 16, 37, 64, 100}) {
      Tridiagonal t{std::vector<double>(size_t(n), a), std::vector<double>(size_t(n - 1), b)};
      std::vector<double> want;
      for (int k = 1; k <= n; ++k) want.push_back(a + 2.0 * b * std::cos(k * M_PI / (n + 1)));
      std::sort(want.begin(), want.end());
      const auto got = solved(t);
      for (size_t k = 0; k < want.size(); ++k)  // relative to the norm: cos(pi / 2) rounds to 6e-17, not 0
        EXPECT_NEAR(got[k], want[k], 4e-15 * (std::abs(a) + 2 * std::abs(b))) << "n " << n << " a " << a << " b " << b;
    }
}

TEST(Tridiagonal, RandomMatricesMatchEigensDenseSolver) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal;
  for (int trial = 0; trial < 400; ++trial) {
    const size_t n = 1 + trial % 70;
    Tridiagonal t;
    for (size_t i = 0; i < n; ++i) t.diag.push_back(normal(rng));
    for (size_t i = 0; i + 1 < n; ++i) t.off.push_back(normal(rng));
    EXPECT_LT(relative_gap(solved(t), dense_reference(t)), 1e-13) << "trial " << trial;
  }
}

TEST(Tridiagonal, GradedSplitAndPositiveSemidefiniteCases) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> unit(0.5, 1.0);
  for (int trial = 0; trial < 200; ++trial) {
    const size_t n = 2 + trial % 50;
    Tridiagonal t;
    for (size_t i = 0; i < n; ++i) {
      // graded from 1 down to 1e-20 (or up, on odd trials), as the Gram of a rank-deficient pair
      const double grade = std::pow(10.0, -20.0 * double(i) / double(n));
      t.diag.push_back(unit(rng) * (trial % 2 ? 1.0 / grade * 1e-20 : grade));
    }
    for (size_t i = 0; i + 1 < n; ++i)
      t.off.push_back(i % 7 == 3 ? 0.0 : 0.3 * std::sqrt(t.diag[i] * t.diag[i + 1]));  // splits at every 7th
    EXPECT_LT(relative_gap(solved(t), dense_reference(t)), 1e-13) << "trial " << trial;
  }
}

TEST(Tridiagonal, DiagonalZeroAndRepeatedMatricesAreExact) {
  Tridiagonal diagonal{{3.0, -1.0, 0.0, 2.5}, {0.0, 0.0, 0.0}};
  EXPECT_EQ(solved(diagonal), (std::vector<double>{-1.0, 0.0, 2.5, 3.0}));
  Tridiagonal zero{std::vector<double>(9, 0.0), std::vector<double>(8, 0.0)};
  EXPECT_EQ(solved(zero), std::vector<double>(9, 0.0));
  // A block repeated with a split between the copies: each eigenvalue twice.
  Tridiagonal twice{{1.0, 2.0, 3.0, 1.0, 2.0, 3.0}, {0.5, 0.5, 0.0, 0.5, 0.5}};
  const auto ev = solved(twice);
  for (size_t i = 0; i < ev.size(); i += 2) EXPECT_NEAR(ev[i], ev[i + 1], 1e-15);
  EXPECT_LT(relative_gap(ev, dense_reference(twice)), 1e-15);
}

TEST(Tridiagonal, ExtremeScalesKeepRelativeAccuracy) {
  // Squared off-diagonals of 1e200 or 1e-200 overflow or underflow without the power-of-two scaling.
  for (double scale : {1e200, 1e-200}) {
    Tridiagonal t{{2.0 * scale, 1.0 * scale, 3.0 * scale}, {1.0 * scale, 0.5 * scale}};
    Tridiagonal unit{{2.0, 1.0, 3.0}, {1.0, 0.5}};
    const auto got = solved(t), want = solved(unit);
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i] / scale, want[i], 1e-12) << scale;
  }
}

TEST(Tridiagonal, NonFiniteInputIsRefused) {
  Tridiagonal t{{1.0, NAN, 2.0}, {0.5, 0.5}};
  EXPECT_FALSE(tridiagonal_eigenvalues(t.diag.data(), t.off.data(), 3));
  Tridiagonal u{{1.0, 2.0}, {INFINITY}};
  EXPECT_FALSE(tridiagonal_eigenvalues(u.diag.data(), u.off.data(), 2));
}

TEST(Tridiagonal, BatchOfMixedMatricesMatchesTheReferenceOneByOne) {
  // Two at a time, interleaved: sizes 0-40, zero, diagonal, non-finite and graded matrices in one batch, so that
  // slots finish at different times and pick up matrices that need no sweep at all.
  std::mt19937_64 rng(13);
  std::normal_distribution<double> normal;
  std::vector<Tridiagonal> input;
  for (int i = 0; i < 120; ++i) {
    const size_t n = size_t(i * 7 % 41);
    Tridiagonal t;
    for (size_t j = 0; j < n; ++j) t.diag.push_back(i % 5 == 1 ? 0.0 : normal(rng) * std::pow(10.0, -double(j % 9)));
    for (size_t j = 0; j + 1 < n; ++j) t.off.push_back(i % 5 == 1 || i % 11 == 4 ? 0.0 : normal(rng));
    if (i % 17 == 9 && n > 2) t.off[1] = NAN;
    input.push_back(t);
  }
  std::vector<Tridiagonal> work = input;
  std::vector<TridiagonalProblem> problems;
  for (auto& t : work) problems.push_back({t.diag.data(), t.off.data(), int64_t(t.diag.size())});
  tridiagonal_eigenvalues(problems.data(), problems.size());
  for (size_t i = 0; i < input.size(); ++i) {
    const bool finite = std::none_of(input[i].off.begin(), input[i].off.end(), [](double v) { return std::isnan(v); });
    ASSERT_EQ(problems[i].converged, finite) << "matrix " << i;
    if (!finite || input[i].diag.empty()) continue;
    std::vector<double> got = work[i].diag;
    std::sort(got.begin(), got.end());
    EXPECT_LT(relative_gap(got, dense_reference(input[i])), 1e-13) << "matrix " << i;
  }
}

TEST(Tridiagonal, SmallGramEqualsTheSmallerProductForEveryShape) {
  std::srand(9);
  for (int rows = 1; rows <= 13; ++rows)
    for (int cols = 1; cols <= 13; ++cols) {  // both orientations; 4q + 0..3 for the blocked and remainder parts
      Eigen::MatrixXd storage = Eigen::MatrixXd::Random(rows + 5, cols);
      const auto m = storage.topRows(rows);  // leading dimension rows + 5
      const int k = std::min(rows, cols);
      Eigen::MatrixXd g(k, k);
      small_gram(m.data(), storage.rows(), rows, cols, g.data());
      Eigen::MatrixXd want = rows <= cols ? Eigen::MatrixXd(m * m.transpose()) : Eigen::MatrixXd(m.transpose() * m);
      EXPECT_LT((g - want).cwiseAbs().maxCoeff(), 1e-14) << rows << " x " << cols;
    }
}

// Eigenvalues of a dense symmetric matrix through tridiagonalize_symmetric and then Eigen's dense solver on the
// tridiagonal result (so that only the reduction is under test), or through both of spread's steps.
Tridiagonal reduced(Eigen::MatrixXd a) {
  const auto n = a.rows();
  Tridiagonal t{std::vector<double>(size_t(n)), std::vector<double>(size_t(std::max<Eigen::Index>(n - 1, 0)))};
  std::vector<double> work(size_t(5 * n));
  tridiagonalize_symmetric(a.data(), n, t.diag.data(), t.off.data(), work.data());
  return t;
}

std::vector<double> dense_reference(const Eigen::MatrixXd& a) {
  Eigen::VectorXd ev = Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(a, Eigen::EigenvaluesOnly).eigenvalues();
  return {ev.data(), ev.data() + ev.size()};
}

TEST(Tridiagonal, ReductionKeepsTheEigenvaluesOfRandomAndGramMatrices) {
  std::srand(5);
  for (int n = 1; n <= 70; ++n) {
    Eigen::MatrixXd x = Eigen::MatrixXd::Random(n, n);
    Eigen::MatrixXd sym = x + x.transpose();
    Eigen::MatrixXd tall = Eigen::MatrixXd::Random(n + 3, n);
    Eigen::MatrixXd gram = tall.transpose() * tall;
    for (const Eigen::MatrixXd& a : {sym, gram}) {
      const auto want = dense_reference(a);
      EXPECT_LT(relative_gap(dense_reference(reduced(a)), want), 1e-13) << "n " << n;
      EXPECT_LT(relative_gap(solved(reduced(a)), want), 1e-13) << "n " << n;
    }
  }
}

TEST(Tridiagonal, ReductionOfRankDeficientAndAlreadyReducedMatrices) {
  // Columns that are already e_1-shaped need no reflection (tau = 0); a rank-2 Gram has n - 2 zero eigenvalues.
  Eigen::MatrixXd diagonal = Eigen::VectorXd::LinSpaced(6, 1.0, 6.0).asDiagonal();
  Eigen::MatrixXd low_rank = Eigen::MatrixXd::Random(2, 9).transpose() * Eigen::MatrixXd::Random(2, 9);
  low_rank = low_rank * low_rank.transpose();
  Eigen::MatrixXd zero = Eigen::MatrixXd::Zero(5, 5);
  for (const Eigen::MatrixXd& a : {diagonal, low_rank, zero}) {
    const auto want = dense_reference(a);
    EXPECT_LT(relative_gap(solved(reduced(a)), want), 1e-14) << a.rows();
  }
  const Tridiagonal t = reduced(diagonal);
  EXPECT_EQ(t.diag, (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(t.off, std::vector<double>(5, 0.0));
}

}  // namespace
}  // namespace spread
