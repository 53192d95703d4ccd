// Spearman's rho and average ranks against SciPy (tests/data/eval/spearman.json, from
// tests/oracles/gen_eval_fixtures.py), against the classic no-ties formula rho = 1 - 6 sum d^2 / (n (n^2 - 1)), and for the cases SciPy leaves undefined.
#include <gtest/gtest.h>
#include "test_paths.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "spread/eval/sts.h"

namespace {

using spread::average_ranks;
using spread::spearman;
using Vec = std::vector<double>;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

nlohmann::json fixture() {
  std::ifstream in(std::string(SPREAD_TEST_DATA_DIR) + "/eval/spearman.json");
  return nlohmann::json::parse(in);
}

}  // namespace

TEST(Sts, MatchesScipyFixture) {
  const nlohmann::json cases = fixture().at("cases");
  ASSERT_GE(cases.size(), 7u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const Vec x = c.at("x").get<Vec>(), y = c.at("y").get<Vec>();
    EXPECT_EQ(average_ranks(x), c.at("ranks_x").get<Vec>());  // half-integers: exact
    EXPECT_EQ(average_ranks(y), c.at("ranks_y").get<Vec>());
    if (c.at("rho").is_null()) {
      EXPECT_TRUE(std::isnan(spearman(x, y)));
    } else {
      EXPECT_NEAR(spearman(x, y), c.at("rho").get<double>(), 1e-14);
    }
  }
}

TEST(Sts, AverageRanksShareTheMeanOfTiedRanks) {
  EXPECT_EQ(average_ranks({10, 20, 20, 5}), (Vec{2, 3.5, 3.5, 1}));
  EXPECT_EQ(average_ranks({7, 7, 7}), (Vec{2, 2, 2}));
  EXPECT_EQ(average_ranks({3, -kInf, kInf, 3}), (Vec{2.5, 1, 4, 2.5}));
  EXPECT_TRUE(average_ranks({}).empty());
  const Vec with_nan = average_ranks({1, kNaN, 2});
  ASSERT_EQ(with_nan.size(), 3u);
  for (double r : with_nan) EXPECT_TRUE(std::isnan(r));
}

TEST(Sts, EqualsClassicFormulaWithoutTies) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> normal;
  const int n = 97;
  Vec x(n), y(n);
  for (int i = 0; i < n; ++i) {
    x[i] = normal(rng);
    y[i] = 0.3 * x[i] + normal(rng);
  }
  // Ranks by counting (independent of the sort in average_ranks): 1 + number of smaller values.
  double d2 = 0;
  for (int i = 0; i < n; ++i) {
    int rx = 1, ry = 1;
    for (int j = 0; j < n; ++j) rx += x[j] < x[i], ry += y[j] < y[i];
    d2 += double(rx - ry) * double(rx - ry);
  }
  EXPECT_NEAR(spearman(x, y), 1.0 - 6.0 * d2 / (double(n) * (double(n) * n - 1)), 1e-14);
}

TEST(Sts, PerfectAndInverseCorrelation) {
  const Vec x = {0.1, 0.4, 0.2, 0.9, 0.5};
  Vec y;
  for (double v : x) y.push_back(std::exp(3 * v));  // monotone, not linear
  EXPECT_DOUBLE_EQ(spearman(x, y), 1.0);
  for (double& v : y) v = -v;
  EXPECT_DOUBLE_EQ(spearman(x, y), -1.0);
  EXPECT_DOUBLE_EQ(spearman({-kInf, 0, kInf}, {1, 2, 3}), 1.0);  // infinities rank like any value
}

TEST(Sts, ConstantInputGivesNaN) {
  EXPECT_TRUE(std::isnan(spearman({1, 2, 3}, {4, 4, 4})));
  EXPECT_TRUE(std::isnan(spearman({0.5, 0.5}, {1, 2})));
  EXPECT_TRUE(std::isnan(spearman({2, 2, 2}, {2, 2, 2})));
}

TEST(Sts, NaNInputGivesNaN) {
  EXPECT_TRUE(std::isnan(spearman({1, kNaN, 3}, {1, 2, 3})));
  EXPECT_TRUE(std::isnan(spearman({1, 2, 3}, {kNaN, 2, 3})));
}

TEST(Sts, BadSizesThrow) {
  EXPECT_THROW(spearman({1, 2, 3}, {1, 2}), std::invalid_argument);
  EXPECT_THROW(spearman({1}, {1}), std::invalid_argument);
  EXPECT_THROW(spearman({}, {}), std::invalid_argument);
}
