// Gram eigenvalues of kLanes matrices at a time (SOCM's per-pair step) against Eigen's dense solver on the Gram, and
// a matrix's result against the same matrix in other batches (padding, lane position and neighbours must not matter).
#include "spread/diagnostics/tridiagonal_lanes.h"

#include <Eigen/Eigenvalues>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <vector>

namespace spread {
namespace {

// A matrix stored inside a taller one, so that the leading dimension is not the row count.
struct Stored {
  Eigen::MatrixXd storage;
  Eigen::Index rows = 0;
  LaneMatrix view() const { return {storage.data(), storage.rows(), rows, storage.cols()}; }
  Eigen::MatrixXd matrix() const { return storage.topRows(rows); }
};

Stored stored(const Eigen::MatrixXd& m) {
  Stored s{Eigen::MatrixXd::Constant(m.rows() + 3, m.cols(), 7.0), m.rows()};  // junk below: must not be read
  s.storage.topRows(m.rows()) = m;
  return s;
}

struct LaneResult {
  std::vector<double> eigenvalues;  // as returned, unsorted
  bool converged = false;
};

// One batch; lanes past `matrices` are empty.
std::vector<LaneResult> run(const std::vector<const Stored*>& matrices) {
  LaneMatrix in[kLanes];
  std::vector<std::vector<double>> out(kLanes, std::vector<double>(80, NAN));
  double* eigenvalues[kLanes];
  bool converged[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    if (size_t(l) < matrices.size()) in[l] = matrices[size_t(l)]->view();
    eigenvalues[l] = out[size_t(l)].data();
  }
  LaneWork work;
  gram_eigenvalues(in, eigenvalues, converged, work);
  std::vector<LaneResult> results;
  for (int l = 0; l < kLanes; ++l) {
    const size_t k = size_t(std::min(in[l].rows, in[l].cols));
    results.push_back({{out[size_t(l)].begin(), out[size_t(l)].begin() + long(k)}, converged[l]});
  }
  return results;
}

// The eigenvalues of the smaller Gram of m, ascending, from Eigen's dense solver.
std::vector<double> reference(const Eigen::MatrixXd& m) {
  const Eigen::MatrixXd g =
      m.rows() <= m.cols() ? Eigen::MatrixXd(m * m.transpose()) : Eigen::MatrixXd(m.transpose() * m);
  const Eigen::VectorXd ev = Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(g, Eigen::EigenvaluesOnly).eigenvalues();
  return {ev.data(), ev.data() + ev.size()};
}

// Largest difference relative to the largest eigenvalue (what a backward-stable method guarantees).
double relative_gap(std::vector<double> got, const std::vector<double>& want) {
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got.size(), want.size());
  double scale = 0, gap = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    scale = std::max(scale, std::abs(want[i]));
    gap = std::max(gap, std::abs(got[i] - want[i]));
  }
  return scale > 0 ? gap / scale : gap;
}

// Matrices of standard normal entries from one seeded stream.
struct Gaussian {
  std::mt19937_64 rng;
  std::normal_distribution<double> normal;
  explicit Gaussian(uint64_t seed) : rng(seed) {}
  Eigen::MatrixXd operator()(Eigen::Index rows, Eigen::Index cols, double offset = 0) {
    Eigen::MatrixXd m(rows, cols);
    for (Eigen::Index j = 0; j < m.size(); ++j) m.data()[j] = normal(rng) + offset;
    return m;
  }
};

void expect_matches_reference(const std::vector<Stored>& matrices, double tolerance) {
  for (size_t b = 0; b < matrices.size(); b += kLanes) {
    std::vector<const Stored*> batch;
    for (size_t i = b; i < std::min(matrices.size(), b + kLanes); ++i) batch.push_back(&matrices[i]);
    const auto results = run(batch);
    for (size_t l = 0; l < batch.size(); ++l) {
      const Eigen::MatrixXd m = batch[l]->matrix();
      ASSERT_TRUE(results[l].converged) << "matrix " << b + l << ", " << m.rows() << " x " << m.cols();
      EXPECT_LT(relative_gap(results[l].eigenvalues, reference(m)), tolerance)
          << "matrix " << b + l << ", " << m.rows() << " x " << m.cols();
    }
  }
}

TEST(TridiagonalLanes, RandomShapesMatchTheDenseSolver) {
  Gaussian random(3);
  std::uniform_int_distribution<int> side(1, 70);
  std::vector<Stored> matrices;
  for (int i = 0; i < 96; ++i) {  // both orientations, sizes mixed within each batch
    const int rows = side(random.rng), cols = side(random.rng);
    matrices.push_back(stored(random(rows, cols, 0.3)));
  }
  expect_matches_reference(matrices, 1e-13);
}

TEST(TridiagonalLanes, GradedBlockRankDeficientAndZeroGrams) {
  // Graded spectra (the QL turns blocks whose far end is smaller), block-diagonal Grams (exact splits), low rank
  // (zero eigenvalues, as every centred token list gives), repeated rows (repeated eigenvalues) and zeros.
  Gaussian random(5);
  std::vector<Stored> matrices;
  for (int size : {5, 17, 36, 63}) {
    Eigen::MatrixXd graded = random(size, size + 9);
    for (Eigen::Index r = 0; r < graded.rows(); ++r) graded.row(r) *= std::pow(10.0, -6.0 * double(r) / size);
    matrices.push_back(stored(graded));
    matrices.push_back(stored(Eigen::MatrixXd(graded.colwise().reverse()).transpose()));  // graded the other way
    Eigen::MatrixXd block = Eigen::MatrixXd::Zero(size, size + 4);
    block.topLeftCorner(size / 2, (size + 4) / 2) = random(size / 2, (size + 4) / 2);
    block.bottomRightCorner(size - size / 2, size + 4 - (size + 4) / 2) =
        random(size - size / 2, size + 4 - (size + 4) / 2);
    matrices.push_back(stored(block));
    matrices.push_back(stored(random(size + 2, 3) * random(3, size)));  // rank 3
    Eigen::MatrixXd repeated = random(size, size + 1);
    repeated.bottomRows(size / 2) = repeated.topRows(size / 2);
    matrices.push_back(stored(repeated));
    matrices.push_back(stored(Eigen::MatrixXd::Zero(size, size + 2)));
  }
  expect_matches_reference(matrices, 1e-13);
}

TEST(TridiagonalLanes, AMatrixGivesTheSameBitsInAnyBatch) {
  // Alone (eight copies), next to larger and smaller matrices that pad it, at another lane, beside empty lanes.
  Gaussian random(8);
  const Stored x = stored(random(29, 41)), tall = stored(random(60, 33)), wide = stored(random(12, 64)),
               big = stored(random(64, 64));
  const auto alone = run(std::vector<const Stored*>(kLanes, &x))[0];
  ASSERT_TRUE(alone.converged);
  const std::vector<std::vector<const Stored*>> batches = {
      {&big, &tall, &wide, &x, &big, &tall, &wide, &big}, {&wide, &x}, {&x}, {&tall, &tall, &tall, &tall, &big, &x}};
  for (const auto& batch : batches) {
    const size_t lane = size_t(std::find(batch.begin(), batch.end(), &x) - batch.begin());
    const auto got = run(batch)[lane];
    EXPECT_TRUE(got.converged);
    EXPECT_EQ(got.eigenvalues, alone.eigenvalues) << "lane " << lane << " of a batch of " << batch.size();
  }
}

TEST(TridiagonalLanes, EmptyLanesAndNonFiniteMatrices) {
  Eigen::MatrixXd finite = Eigen::MatrixXd::Random(6, 9), bad = Eigen::MatrixXd::Random(7, 4);
  bad(2, 1) = NAN;
  const Stored a = stored(finite), b = stored(bad), empty{Eigen::MatrixXd(0, 5), 0};
  const auto results = run({&a, &b, &empty, &a});
  EXPECT_TRUE(results[0].converged);
  EXPECT_FALSE(results[1].converged);  // the caller falls back to an SVD, which reports the NaN
  EXPECT_TRUE(results[2].converged);
  EXPECT_TRUE(results[2].eigenvalues.empty());
  EXPECT_EQ(results[3].eigenvalues, results[0].eigenvalues);  // its neighbour's NaN did not leak into it
  EXPECT_LT(relative_gap(results[0].eigenvalues, reference(finite)), 1e-13);
  for (int l = 4; l < kLanes; ++l) EXPECT_TRUE(results[size_t(l)].converged);
}

}  // namespace
}  // namespace spread
