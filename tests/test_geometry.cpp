// Geometry diagnostics (docs/design.md §7.1, §7.2) against brute-force loops over all token pairs.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <vector>

#include "spread/diagnostics/geometry.h"

namespace {

double cosine(const torch::Tensor& a, const torch::Tensor& b) {  // zero vector: cosine 0 (u = 0)
  double na = a.norm().item<double>(), nb = b.norm().item<double>();
  if (na == 0 || nb == 0) return 0;
  return a.dot(b).item<double>() / (na * nb);
}

// Mean cosine over all (j, k), or over j != k.
double brute_mean_cos(const torch::Tensor& x, bool self_pairs) {
  double sum = 0;
  int64_t count = 0;
  for (int64_t j = 0; j < x.size(0); ++j)
    for (int64_t k = 0; k < x.size(0); ++k) {
      if (j == k && !self_pairs) continue;
      sum += cosine(x[j], x[k]);
      ++count;
    }
  return sum / static_cast<double>(count);
}

double brute_concentration(const torch::Tensor& x) {
  const int64_t n = x.size(0), d = x.size(1);
  std::vector<double> mu(d, 0.0);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t f = 0; f < d; ++f) mu[f] += x[j][f].item<double>() / n;
  double s = 0, mu2 = 0;
  for (int64_t j = 0; j < n; ++j)
    for (int64_t f = 0; f < d; ++f) s += std::pow(x[j][f].item<double>() - mu[f], 2) / n;
  for (double m : mu) mu2 += m * m;
  return s / mu2;
}

// Texts as lists of their valid rows.
std::vector<torch::Tensor> texts(const torch::Tensor& x, const torch::Tensor& mask) {
  std::vector<torch::Tensor> out;
  for (int64_t b = 0; b < x.size(0); ++b) out.push_back(x[b].index({mask[b]}));
  return out;
}

// Mean and variance of the cosine over every pair of valid tokens from different texts.
std::pair<double, double> brute_cross_cos(const std::vector<torch::Tensor>& t) {
  double sum = 0, sum2 = 0;
  int64_t count = 0;
  for (size_t a = 0; a < t.size(); ++a)
    for (size_t b = a + 1; b < t.size(); ++b)
      for (int64_t j = 0; j < t[a].size(0); ++j)
        for (int64_t k = 0; k < t[b].size(0); ++k) {
          double c = cosine(t[a][j], t[b][k]);
          sum += c, sum2 += c * c, ++count;
        }
  double mean = sum / count;
  return {mean, sum2 / count - mean * mean};
}

torch::Tensor random_list(int64_t n, int64_t d, uint64_t seed) {  // a shared offset makes the cosines non-trivial
  torch::manual_seed(seed);
  return torch::randn({n, d}, torch::kFloat64) + 0.7;
}

TEST(Geometry, MeanCosIdentityEqualsBruteForce) {
  torch::Tensor x = random_list(9, 5, 1);
  EXPECT_NEAR(spread::mean_cos_incl(x), brute_mean_cos(x, true), 1e-12);
  EXPECT_NEAR(spread::mean_cos_excl(x), brute_mean_cos(x, false), 1e-12);
  const double n = 9, incl = spread::mean_cos_incl(x);
  EXPECT_NEAR(spread::mean_cos_excl(x), (n * incl - 1) / (n - 1), 1e-12);  // docs/design.md §7.1's form, no zero rows
}

TEST(Geometry, MeanCosInFloat32InputIsComputedInFloat64) {
  torch::Tensor x = random_list(40, 8, 2);
  EXPECT_NEAR(spread::mean_cos_excl(x.to(torch::kFloat32)), brute_mean_cos(x.to(torch::kFloat32).to(torch::kFloat64),
                                                                           false), 1e-12);
}

TEST(Geometry, ZeroRowCountsAsCosineZero) {
  torch::Tensor x = random_list(5, 3, 3);
  x[2].zero_();
  EXPECT_NEAR(spread::mean_cos_excl(x), brute_mean_cos(x, false), 1e-12);
  EXPECT_NEAR(spread::mean_cos_incl(x), brute_mean_cos(x, true), 1e-12);
}

TEST(Geometry, MeanCosHandValues) {
  torch::Tensor same = torch::tensor({1.0, 2.0, 1.0, 2.0, 3.0, 6.0}, torch::kFloat64).view({3, 2});
  EXPECT_NEAR(spread::mean_cos_excl(same), 1.0, 1e-15);
  torch::Tensor ortho = torch::eye(4, torch::kFloat64);
  EXPECT_NEAR(spread::mean_cos_incl(ortho), 0.25, 1e-15);  // only the 4 self pairs of 16
  EXPECT_NEAR(spread::mean_cos_excl(ortho), 0.0, 1e-15);
  EXPECT_THROW(spread::mean_cos_excl(ortho.narrow(0, 0, 1)), std::invalid_argument);
}

TEST(Geometry, ConcentrationEqualsBruteForceAndIsScaleFree) {
  torch::Tensor x = random_list(7, 4, 4);
  EXPECT_NEAR(spread::concentration(x), brute_concentration(x), 1e-12);
  EXPECT_NEAR(spread::concentration(3.5 * x), brute_concentration(x), 1e-12);
  // Hand value: rows (1, 0) and (3, 0): mu = (2, 0), S = 1, ||mu||^2 = 4.
  EXPECT_NEAR(spread::concentration(torch::tensor({1.0, 0.0, 3.0, 0.0}, torch::kFloat64).view({2, 2})), 0.25, 1e-15);
}

TEST(Geometry, StatsAverageTextsAndIgnorePadding) {
  torch::manual_seed(5);
  torch::Tensor x = torch::randn({4, 6, 3}, torch::kFloat64) + 0.5;
  torch::Tensor mask = torch::ones({4, 6}, torch::kBool);
  mask[0].narrow(0, 4, 2).fill_(false);
  mask[1].fill_(false);
  mask[1][3] = true;      // one token: counts for incl and concentration, not for excl
  mask[2].fill_(false);   // empty: skipped
  torch::Tensor garbage = x.clone();
  garbage.masked_fill_(mask.logical_not().unsqueeze(-1), 1e300);
  auto g = spread::geometry_stats(garbage, mask, 0, 1 << 20);

  auto t = texts(x, mask);
  double incl = 0, conc = 0, excl = 0;
  for (int b : {0, 1, 3}) incl += brute_mean_cos(t[b], true) / 3, conc += brute_concentration(t[b]) / 3;
  for (int b : {0, 3}) excl += brute_mean_cos(t[b], false) / 2;
  EXPECT_NEAR(g.mean_cos_incl, incl, 1e-12);
  EXPECT_NEAR(g.mean_cos_excl, excl, 1e-12);
  EXPECT_NEAR(g.concentration, conc, 1e-12);
  EXPECT_NEAR(g.batch_mean_cos, brute_cross_cos(t).first, 1e-12);  // every pair fits in max_pairs: exact
}

TEST(Geometry, BatchMeanCosIsExactWhenAllPairsFit) {
  torch::manual_seed(6);
  torch::Tensor x = torch::randn({3, 5, 4}, torch::kFloat64) + 0.3;
  torch::Tensor mask = torch::ones({3, 5}, torch::kBool);
  mask[1][0] = false;
  // Cross pairs: 5*4 + 5*5 + 4*5 = 65; a budget of exactly 65 is enough.
  EXPECT_NEAR(spread::batch_mean_cos(x, mask, 1, 65), brute_cross_cos(texts(x, mask)).first, 1e-12);
}

TEST(Geometry, BatchMeanCosSamplesWithinTolerance) {
  // Each text leans on its own axis, so pairs within a text (cosine near 0.8) would bias a sampler that let them in.
  torch::manual_seed(7);
  torch::Tensor x = 0.5 * torch::randn({4, 30, 6}, torch::kFloat64);
  for (int64_t b = 0; b < 4; ++b) x[b].select(1, b) += 2.0;
  torch::Tensor mask = torch::ones({4, 30}, torch::kBool);
  mask[3].narrow(0, 10, 20).fill_(false);
  auto [mean, var] = brute_cross_cos(texts(x, mask));
  const int64_t pairs = 2000;  // of 30*30*3 + 3*30*10 = 3600
  double a = spread::batch_mean_cos(x, mask, 42, pairs);
  EXPECT_EQ(a, spread::batch_mean_cos(x, mask, 42, pairs));  // deterministic given the seed
  EXPECT_NE(a, spread::batch_mean_cos(x, mask, 43, pairs));
  EXPECT_NEAR(a, mean, 5 * std::sqrt(var / pairs));
}

TEST(Geometry, BatchMeanCosSeparatesTextsFromTheBatch) {
  // Two texts, each of one repeated direction, orthogonal to each other: within 1, across 0.
  torch::Tensor x = torch::zeros({2, 3, 2}, torch::kFloat64);
  x[0].select(1, 0).fill_(1.0);
  x[1].select(1, 1).fill_(2.0);
  auto g = spread::geometry_stats(x, torch::ones({2, 3}, torch::kBool), 0);
  EXPECT_NEAR(g.mean_cos_excl, 1.0, 1e-15);
  EXPECT_NEAR(g.batch_mean_cos, 0.0, 1e-15);
  EXPECT_NEAR(spread::batch_mean_cos(x, {}, 3, 4), 0.0, 1e-15);  // 4 of the 9 cross pairs, sampled: still 0
  EXPECT_TRUE(std::isnan(spread::batch_mean_cos(x.narrow(0, 0, 1), {}, 0)));  // one text: no cross pairs
}

}  // namespace
