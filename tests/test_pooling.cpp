// Mean, CLS and last-token pooling (docs/design.md §4) against values written out by hand and plain loops, with padding
// that holds garbage (huge values, inf, NaN) so that any leak shows in the result or the gradient.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "spread/pooling/pooling.h"

namespace {

using spread::Pooling;

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

// [1, n + pad, F]: the n rows of x, then pad rows of garbage.
torch::Tensor with_garbage_padding(const torch::Tensor& x, int64_t pad) {
  torch::Tensor garbage = torch::full({1, pad, x.size(2)}, 1e30, x.options());
  garbage[0][0][0] = kNaN;
  if (pad > 1) garbage[0][1][1] = -kInf;
  return torch::cat({x, garbage}, 1);
}

torch::Tensor valid_prefix_mask(const std::vector<int64_t>& lengths, int64_t length) {
  torch::Tensor m = torch::zeros({int64_t(lengths.size()), length}, torch::kBool);
  for (size_t b = 0; b < lengths.size(); ++b) m[long(b)].narrow(0, 0, lengths[b]).fill_(true);
  return m;
}

// hidden[b][t][f] = 100 b + 10 t + f: every entry names its own position.
torch::Tensor position_coded(int64_t batch, int64_t length, int64_t features) {
  torch::Tensor h = torch::empty({batch, length, features}, torch::kFloat64);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < length; ++t)
      for (int64_t f = 0; f < features; ++f) h[b][t][f] = 100.0 * b + 10.0 * t + f;
  return h;
}

}  // namespace

TEST(Pooling, PaddedAndUnpaddedSequencesGiveTheSameEmbedding) {
  torch::manual_seed(1);
  const int64_t F = 4;
  torch::Tensor x = torch::randn({1, 3, F}, torch::kFloat64);
  torch::Tensor padded = with_garbage_padding(x, 2);  // [1, 5, F]
  torch::Tensor mask = valid_prefix_mask({3}, 5);
  // The references by loop: mean of the three rows, row 0, row 2.
  torch::Tensor mean = torch::zeros({1, F}, torch::kFloat64);
  for (int64_t f = 0; f < F; ++f)
    mean[0][f] = (x[0][0][f].item<double>() + x[0][1][f].item<double>() + x[0][2][f].item<double>()) / 3;
  const std::vector<std::pair<Pooling, torch::Tensor>> expected{
      {Pooling::Mean, mean}, {Pooling::Cls, x.select(1, 0)}, {Pooling::LastToken, x.select(1, 2)}};
  for (const auto& [p, want] : expected) {
    torch::Tensor from_padded = spread::pool(p, padded, mask);
    torch::Tensor unpadded = spread::pool(p, x, torch::ones({1, 3}, torch::kBool));
    torch::Tensor no_mask = spread::pool(p, x, torch::Tensor());
    EXPECT_EQ(from_padded.sizes(), (std::vector<int64_t>{1, F}));
    EXPECT_TRUE(torch::allclose(from_padded, want, 0, 1e-15)) << int(p) << from_padded;
    EXPECT_TRUE(torch::allclose(unpadded, want, 0, 1e-15)) << int(p);
    EXPECT_TRUE(torch::allclose(no_mask, want, 0, 1e-15)) << int(p);
  }
}

TEST(Pooling, MeanOfABatchOfDifferentLengthsMatchesHandValues) {
  // Row 0: (1, 2), (3, 4), (5, 0), pad -> (3, 2). Row 1: (7, -1), pad, pad, pad -> (7, -1).
  torch::Tensor h = torch::tensor({1.0, 2.0, 3.0, 4.0, 5.0, 0.0, 100.0, 100.0,  //
                                   7.0, -1.0, kNaN, 9.0, 50.0, 50.0, -kInf, 0.0},
                                  torch::kFloat32)
                        .view({2, 4, 2});
  torch::Tensor got = spread::mean_pool(h, valid_prefix_mask({3, 1}, 4));
  EXPECT_EQ(got.scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::equal(got, torch::tensor({3.0f, 2.0f, 7.0f, -1.0f}).view({2, 2}))) << got;
}

TEST(Pooling, LastTokenPicksTheLastValidPositionOfEachRow) {
  torch::Tensor h = position_coded(3, 5, 2);
  torch::Tensor got = spread::last_token_pool(h, valid_prefix_mask({5, 2, 1}, 5));
  // positions 4, 1, 0 of rows 0, 1, 2
  torch::Tensor want = torch::tensor({40.0, 41.0, 110.0, 111.0, 200.0, 201.0}, torch::kFloat64).view({3, 2});
  EXPECT_TRUE(torch::equal(got, want)) << got;
  // Left padding: the last token is the last position.
  torch::Tensor left = torch::tensor({false, false, true, true, true}).view({1, 5});
  EXPECT_TRUE(torch::equal(spread::last_token_pool(position_coded(1, 5, 2), left),
                           torch::tensor({40.0, 41.0}, torch::kFloat64).view({1, 2})));
}

TEST(Pooling, ClsPicksPositionZeroOfEachRow) {
  torch::Tensor h = position_coded(3, 4, 3);
  torch::Tensor got = spread::cls_pool(h, valid_prefix_mask({4, 2, 1}, 4));
  torch::Tensor want = torch::tensor({0.0, 1.0, 2.0, 100.0, 101.0, 102.0, 200.0, 201.0, 202.0}, torch::kFloat64);
  EXPECT_TRUE(torch::equal(got, want.view({3, 3})));
}

TEST(Pooling, ATextWithoutValidTokensPoolsToZeroOrPositionZero) {
  torch::Tensor h = position_coded(2, 3, 2) + 1;  // no zero entries
  h[1][2][0] = kNaN;
  torch::Tensor mask = valid_prefix_mask({2, 0}, 3);
  torch::Tensor mean = spread::mean_pool(h, mask);
  EXPECT_TRUE(torch::equal(mean[1], torch::zeros({2}, torch::kFloat64))) << mean;
  EXPECT_TRUE(torch::equal(mean[0], torch::tensor({6.0, 7.0}, torch::kFloat64)));  // (1 + 11) / 2, (2 + 12) / 2
  EXPECT_TRUE(torch::equal(spread::last_token_pool(h, mask)[1], torch::tensor({101.0, 102.0}, torch::kFloat64)));
}

TEST(Pooling, PaddingGetsNoGradient) {
  torch::manual_seed(2);
  torch::Tensor x = with_garbage_padding(torch::randn({1, 3, 4}, torch::kFloat64), 2);
  torch::Tensor mask = valid_prefix_mask({3}, 5);
  const std::vector<std::pair<Pooling, std::vector<double>>> weights{
      {Pooling::Mean, {1.0 / 3, 1.0 / 3, 1.0 / 3, 0, 0}},
      {Pooling::Cls, {1, 0, 0, 0, 0}},
      {Pooling::LastToken, {0, 0, 1, 0, 0}}};
  for (const auto& [p, w] : weights) {
    torch::Tensor leaf = x.clone().requires_grad_(true);
    spread::pool(p, leaf, mask).sum().backward();
    torch::Tensor want = torch::tensor(w, torch::kFloat64).view({1, 5, 1}).expand({1, 5, 4});
    EXPECT_TRUE(torch::allclose(leaf.grad(), want, 0, 1e-15)) << int(p) << leaf.grad();
  }
}

TEST(Pooling, AcceptsAnIntegerAttentionMask) {
  torch::Tensor h = position_coded(2, 4, 2);
  torch::Tensor b = valid_prefix_mask({3, 2}, 4);
  torch::Tensor i = b.to(torch::kLong);
  for (Pooling p : {Pooling::Mean, Pooling::Cls, Pooling::LastToken})
    EXPECT_TRUE(torch::equal(spread::pool(p, h, i), spread::pool(p, h, b))) << int(p);
  torch::Tensor want = torch::tensor({10.0, 11.0, 105.0, 106.0}, torch::kFloat64).view({2, 2});  // rows 0-2, 0-1
  EXPECT_TRUE(torch::equal(spread::mean_pool(h, i), want));
}

TEST(Pooling, ParsesItsNamesAndRejectsOthers) {
  EXPECT_EQ(spread::parse_pooling("mean"), Pooling::Mean);
  EXPECT_EQ(spread::parse_pooling("cls"), Pooling::Cls);
  EXPECT_EQ(spread::parse_pooling("last"), Pooling::LastToken);
  EXPECT_EQ(spread::parse_pooling("max"), Pooling::Max);
  EXPECT_EQ(spread::parse_pooling("weightedmean"), Pooling::WeightedMean);
  for (const std::string bad : {"median", "Mean", "", "last_token", "lasttoken"}) {
    try {
      spread::parse_pooling(bad);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("mean, cls, last, max, weightedmean"), std::string::npos) << e.what();
    }
  }
}

TEST(Pooling, RejectsMismatchedShapes) {
  torch::Tensor h = torch::zeros({2, 3, 4});
  EXPECT_THROW(spread::mean_pool(h, torch::ones({2, 4}, torch::kBool)), c10::Error);
  EXPECT_THROW(spread::last_token_pool(h.select(2, 0), torch::ones({2, 3}, torch::kBool)), c10::Error);
  EXPECT_THROW(spread::cls_pool(h, torch::ones({3, 3}, torch::kBool)), c10::Error);
}

// sentence-transformers' max and weightedmean, by loops over a hand-made batch with right padding that holds NaN
// (padding never enters): max over valid tokens; weights = 1-based positions in the padded batch.
TEST(Pooling, MaxAndWeightedMeanFollowTheLibrarysFormulas) {
  const int64_t B = 2, T = 4, F = 3;
  auto hidden = torch::randn({B, T, F}, torch::kDouble);
  auto mask = torch::tensor({1, 1, 1, 0, 1, 1, 0, 0}, torch::kBool).view({B, T});
  hidden.index_put_({1, 3}, std::numeric_limits<double>::quiet_NaN());
  hidden.index_put_({0, 3}, 1e6);  // a pad larger than every real value
  auto max = spread::max_pool(hidden, mask), weighted = spread::weighted_mean_pool(hidden, mask);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t f = 0; f < F; ++f) {
      double best = -1e300, sum = 0, weight = 0;
      for (int64_t t = 0; t < T; ++t) {
        if (!mask[b][t].item<bool>()) continue;
        const double x = hidden[b][t][f].item<double>();
        best = std::max(best, x);
        sum += double(t + 1) * x;
        weight += double(t + 1);
      }
      EXPECT_DOUBLE_EQ(max[b][f].item<double>(), best);
      EXPECT_NEAR(weighted[b][f].item<double>(), sum / weight, 1e-12);
    }
  // A text without a valid token: the library's fill value for max, 0 for the weighted mean.
  auto none = torch::zeros({1, T}, torch::kBool);
  EXPECT_DOUBLE_EQ(spread::max_pool(hidden.narrow(0, 0, 1), none)[0][0].item<double>(), -1e9);
  EXPECT_DOUBLE_EQ(spread::weighted_mean_pool(hidden.narrow(0, 0, 1), none)[0][0].item<double>(), 0.0);
}
