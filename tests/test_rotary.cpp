// The rotary + grouped-query node (model/rotary.h): a hand-computed rotation and head order, its float32 loops
// against the same computation from LibTorch operators (bit for bit forward, as transformers rounds it) and its
// gradients against autograd of those operators in float64, for grouped, plain and single k/v heads, with and
// without rotation.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "spread/model/rotary.h"

namespace {

constexpr int64_t kD = 6;

// transformers' tables for head size D: angles t * theta^(-2i/D), repeated for both halves; [positions, 1, D].
std::pair<torch::Tensor, torch::Tensor> angle_tables(int64_t positions, int64_t D, double theta = 10000.0) {
  auto inv_freq = 1.0 / torch::pow(theta, torch::arange(0, D, 2, torch::kDouble) / double(D));
  auto angles = torch::outer(torch::arange(positions, torch::kDouble), inv_freq);
  auto both = torch::cat({angles, angles}, -1).unsqueeze(1);
  return {both.cos().to(torch::kFloat), both.sin().to(torch::kFloat)};
}

struct Case {
  int64_t H, K;
  bool rope;
};

const Case kCases[] = {{4, 2, true}, {4, 4, true}, {6, 1, true}, {6, 3, false}, {3, 3, true}};

}  // namespace

// D = 2, one query head turned by position 1's angle (theta^0 = 1 radian): (1, 0) -> (cos 1, sin 1) and
// (0, 1) -> (-sin 1, cos 1); the k/v heads of a group come out in repeat_kv's order (head h reads k/v head h / 2).
TEST(Rotary, TurnsByThePositionsAngleAndRepeatsKvHeadsInOrder) {
  auto [cos, sin] = angle_tables(2, 2);
  // B = 1, T = 2, H = 2 query heads, K = 1 k/v head, D = 2: [q0 q1 | k | v] per token
  auto qkv = torch::tensor({0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f,   // position 0: zeros
                            1.f, 0.f, 0.f, 1.f, 2.f, 0.f, 5.f, 7.f})  // position 1
                 .view({1, 2, 8});
  auto y = spread::rotate_and_repeat_heads(qkv, cos, sin, 2, 1).select(1, 1).select(0, 0);
  const float c = std::cos(1.0f), s = std::sin(1.0f);
  auto expected = torch::tensor({c, s, -s, c,                 // q heads
                                 2 * c, 2 * s, 2 * c, 2 * s,  // k, repeated
                                 5.f, 7.f, 5.f, 7.f});        // v, repeated, not turned
  EXPECT_TRUE(torch::allclose(y, expected, 1e-6, 1e-6)) << y;
}

TEST(Rotary, FloatLoopsEqualTheOperatorsBitForBit) {
  torch::manual_seed(4);
  for (const auto& c : kCases) {
    auto [cos, sin] = angle_tables(9, kD);  // a table longer than T, as the model's is
    if (!c.rope) cos = sin = torch::Tensor();
    auto qkv = torch::randn({3, 7, (c.H + 2 * c.K) * kD}) * 3;
    auto y = spread::rotate_and_repeat_heads(qkv, cos, sin, c.H, c.K);
    auto y_ref = spread::rotate_and_repeat_heads_reference(qkv, cos, sin, c.H, c.K);
    ASSERT_EQ(y.sizes(), (torch::IntArrayRef{3, 7, 3 * c.H * kD}));
    EXPECT_TRUE(torch::equal(y, y_ref)) << "H " << c.H << " K " << c.K << " rope " << c.rope << ": "
                                        << (y - y_ref).abs().max().item<float>();
  }
}

// Backward: the loops' gradient of qkv (float32) against autograd of the operators in float64, for a loss that
// weighs every output differently.
TEST(Rotary, GradientMatchesAutogradInDouble) {
  torch::manual_seed(5);
  for (const auto& c : kCases) {
    auto [cos, sin] = angle_tables(9, kD);
    if (!c.rope) cos = sin = torch::Tensor();
    auto qkv = torch::randn({2, 9, (c.H + 2 * c.K) * kD}).requires_grad_(true);
    auto weights = torch::randn({2, 9, 3 * c.H * kD});
    auto y = spread::rotate_and_repeat_heads(qkv, cos, sin, c.H, c.K);
    auto grad = torch::autograd::grad({(y * weights).sum()}, {qkv})[0];
    auto qkv64 = qkv.detach().to(torch::kDouble).requires_grad_(true);
    auto table64 = [](const torch::Tensor& t) { return t.defined() ? t.to(torch::kDouble) : t; };
    auto y64 = spread::rotate_and_repeat_heads_reference(qkv64, table64(cos), table64(sin), c.H, c.K);
    auto grad64 = torch::autograd::grad({(y64 * weights.to(torch::kDouble)).sum()}, {qkv64})[0];
    EXPECT_TRUE(torch::allclose(grad.to(torch::kDouble), grad64, 1e-5, 1e-5))
        << "H " << c.H << " K " << c.K << " rope " << c.rope << ": "
        << (grad.to(torch::kDouble) - grad64).abs().max().item<double>();
  }
}

TEST(Rotary, RefusesHeadCountsThatDoNotDivide) {
  auto qkv = torch::randn({1, 2, (4 + 2 * 3) * kD});
  EXPECT_THROW(spread::rotate_and_repeat_heads(qkv, {}, {}, 4, 3), c10::Error);
}
