// Alignment and uniformity (Wang & Isola 2020; docs/design.md §7.4) against hand-worked values and plain double loops.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "spread/diagnostics/alignment.h"

namespace {

using Vec = std::vector<double>;
using Rows = std::vector<Vec>;

Rows rows_of(const torch::Tensor& t) {
  torch::Tensor c = t.to(torch::kFloat64).contiguous();
  Rows out;
  for (int64_t i = 0; i < c.size(0); ++i)
    out.emplace_back(c[i].data_ptr<double>(), c[i].data_ptr<double>() + c.size(1));
  return out;
}

Vec unit(Vec v) {
  double n = 0;
  for (double x : v) n += x * x;
  n = std::max(std::sqrt(n), 1e-12);
  for (double& x : v) x /= n;
  return v;
}

double squared_distance(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t f = 0; f < a.size(); ++f) s += (a[f] - b[f]) * (a[f] - b[f]);
  return s;
}

double ref_alignment(const Rows& u, const Rows& v) {
  double s = 0;
  for (size_t i = 0; i < u.size(); ++i) s += squared_distance(unit(u[i]), unit(v[i]));
  return s / double(u.size());
}

double ref_uniformity(const Rows& x) {
  Rows u;
  for (const auto& r : x) u.push_back(unit(r));
  double s = 0, pairs = 0;
  for (size_t i = 0; i < u.size(); ++i)
    for (size_t j = i + 1; j < u.size(); ++j) s += std::exp(-2 * squared_distance(u[i], u[j])), ++pairs;
  return std::log(s / pairs);
}

}  // namespace

TEST(Alignment, MatchesHandValues) {
  // (3, 0) vs (2, 0): same direction, 0; (0, 3) vs (0, -1): antipodal, ||(0, 2)||^2 = 4. Mean 2.
  torch::Tensor u = torch::tensor({1.0, 0.0, 0.0, 3.0}).view({2, 2});
  torch::Tensor v = torch::tensor({2.0, 0.0, 0.0, -1.0}).view({2, 2});
  EXPECT_NEAR(spread::alignment(u, v), 2.0, 1e-15);
  // Orthogonal pairs: 2 each; at 60 degrees: 2 - 2 cos = 1.
  EXPECT_NEAR(spread::alignment(torch::eye(3), torch::eye(3).roll(1, 1)), 2.0, 1e-15);
  torch::Tensor sixty = torch::tensor({0.5, std::sqrt(3.0) / 2}).view({1, 2});
  EXPECT_NEAR(spread::alignment(torch::tensor({4.0, 0.0}).view({1, 2}), sixty), 1.0, 1e-7);  // float32 input
}

TEST(Uniformity, MatchesHandValues) {
  // e1, e2, -e1 (at other lengths): squared distances 2, 4, 2.
  torch::Tensor u = torch::tensor({2.0, 0.0, 0.0, 0.5, -3.0, 0.0}, torch::kFloat64).view({3, 2});
  EXPECT_NEAR(spread::uniformity(u), std::log((2 * std::exp(-4.0) + std::exp(-8.0)) / 3), 1e-14);
  // A regular tetrahedron: every squared distance is 8/3, so log exp(-16/3) = -4 - 4/3, the minimum for 4 points.
  torch::Tensor tetra =
      torch::tensor({1.0, 1.0, 1.0, 1.0, -1.0, -1.0, -1.0, 1.0, -1.0, -1.0, -1.0, 1.0}, torch::kFloat64).view({4, 3});
  EXPECT_NEAR(spread::uniformity(tetra), -4 - 4.0 / 3, 1e-14);
  // Coinciding directions: the maximum, 0.
  EXPECT_NEAR(spread::uniformity(torch::tensor({1.0, 2.0, 2.0, 4.0, 0.5, 1.0}).view({3, 2})), 0.0, 1e-7);
}

TEST(Alignment, MatchesTheLoopsOnRandomRows) {
  torch::manual_seed(7);
  torch::Tensor u = torch::randn({40, 6}) * torch::rand({40, 1}) * 5, v = torch::randn({40, 6});
  u[3].zero_();  // an all-zero row stays 0: ||0 - v_3||^2 = 1
  EXPECT_NEAR(spread::alignment(u, v), ref_alignment(rows_of(u), rows_of(v)), 1e-13);
  EXPECT_NEAR(spread::uniformity(u), ref_uniformity(rows_of(u)), 1e-13);
  torch::Tensor low = v.to(torch::kBFloat16);  // any float dtype; the reference sees the same rounded values
  EXPECT_NEAR(spread::uniformity(low), ref_uniformity(rows_of(low)), 1e-13);
}

TEST(Uniformity, MatchesTheLoopsAcrossRowBlocks) {
  // More rows than one block of the implementation (1024), in few dimensions so that pairs differ a lot.
  torch::manual_seed(8);
  torch::Tensor u = torch::randn({1500, 3}, torch::kFloat64);
  u.narrow(0, 0, 500).add_(torch::tensor({2.0, 0.0, 0.0}, torch::kFloat64));  // not uniform: a denser cap
  EXPECT_NEAR(spread::uniformity(u), ref_uniformity(rows_of(u)), 1e-12);
}

TEST(Alignment, KeepsNoGraphAndReturnsNaNWithoutData) {
  torch::Tensor u = torch::randn({5, 4}, torch::requires_grad()), v = torch::randn({5, 4});
  EXPECT_TRUE(std::isfinite(spread::alignment(u, v)));
  EXPECT_TRUE(std::isfinite(spread::uniformity(u)));
  EXPECT_TRUE(std::isnan(spread::uniformity(u.narrow(0, 0, 1))));
  EXPECT_TRUE(std::isnan(spread::alignment(torch::zeros({0, 4}), torch::zeros({0, 4}))));
  EXPECT_THROW(spread::alignment(u, v.narrow(0, 0, 4)), std::invalid_argument);
  EXPECT_THROW(spread::uniformity(u.view({-1})), std::invalid_argument);
}
