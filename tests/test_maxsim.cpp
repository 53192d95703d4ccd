// Late interaction: MaxSim scores against a brute-force loop (padding, chunks, all-negative similarities), the
// contrastive loss on a hand-computed case, the pooled vectors' two straight-through gradients against their
// closed forms, and the pooling-aware step's weights reaching the gradient.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "spread/data/special_tokens.h"
#include "spread/encode/multi_vector.h"
#include "spread/losses/maxsim.h"
#include "spread/pooling/ward_ste.h"
#include "spread/tasks/maxsim.h"

namespace {

namespace F = torch::nn::functional;

torch::Tensor unit_rows(std::vector<int64_t> shape, uint64_t seed, torch::ScalarType dtype = torch::kDouble) {
  torch::manual_seed(seed);
  return F::normalize(torch::randn(shape, dtype), F::NormalizeFuncOptions().dim(-1));
}

// s(q, D) by loops over valid tokens, in double.
double brute_maxsim(const torch::Tensor& q, const torch::Tensor& qm, const torch::Tensor& d, const torch::Tensor& dm) {
  double total = 0;
  for (int64_t i = 0; i < q.size(0); ++i) {
    if (!qm[i].item<bool>()) continue;
    double best = -INFINITY;
    for (int64_t j = 0; j < d.size(0); ++j)
      if (dm[j].item<bool>()) best = std::max(best, q[i].dot(d[j]).item<double>());
    total += best;
  }
  return total;
}

TEST(MaxSim, ScoresEqualABruteForceLoopWithPaddingOnBothSidesAndInChunks) {
  const int64_t Q = 3, Lq = 5, N = 4, Ld = 7, d = 8;
  auto q = unit_rows({Q, Lq, d}, 1), docs = unit_rows({N, Ld, d}, 2);
  torch::manual_seed(3);
  auto qm = torch::rand({Q, Lq}).gt(0.3), dm = torch::rand({N, Ld}).gt(0.4);
  qm.select(1, 0).fill_(true);
  dm.select(1, 0).fill_(true);
  for (int64_t max_block : {int64_t(1) << 24, int64_t(1)}) {  // one call, then one document per chunk
    auto s = spread::maxsim_scores(q, qm, docs, dm, max_block);
    ASSERT_EQ(s.sizes(), (std::vector<int64_t>{Q, N}));
    for (int64_t a = 0; a < Q; ++a)
      for (int64_t b = 0; b < N; ++b)
        EXPECT_NEAR(s[a][b].item<double>(), brute_maxsim(q[a], qm[a], docs[b], dm[b]), 1e-12) << a << "," << b;
  }
  // A document padded with extra masked rows scores as the document alone; float32 input sums in float32.
  auto alone = spread::maxsim_scores(q.to(torch::kFloat), {}, docs.narrow(0, 0, 1).narrow(1, 0, 3).to(torch::kFloat), {});
  auto padded_doc = torch::cat({docs.narrow(0, 0, 1).narrow(1, 0, 3), torch::ones({1, 4, d}, torch::kDouble)}, 1);
  auto padded_mask = torch::tensor({1, 1, 1, 0, 0, 0, 0}).view({1, 7}).to(torch::kBool);
  auto padded = spread::maxsim_scores(q.to(torch::kFloat), {}, padded_doc.to(torch::kFloat), padded_mask);
  EXPECT_EQ(alone.scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::allclose(alone, padded, 0, 1e-6));
}

TEST(MaxSim, APaddingTokenNeverWinsEvenWhenEverySimilarityIsNegative) {
  auto q = torch::tensor({1.0f, 0.0f}).view({1, 1, 2});
  // Valid tokens point away from the query; the zero padding row would score 0 > -0.6 if it took part.
  auto d = torch::tensor({-1.0f, 0.0f, -0.6f, -0.8f, 0.0f, 0.0f}).view({1, 3, 2});
  auto dm = torch::tensor({1, 1, 0}).view({1, 3}).to(torch::kBool);
  EXPECT_FLOAT_EQ(spread::maxsim_scores(q, {}, d, dm).item<float>(), -0.6f);
}

TEST(MaxSim, ContrastiveLossOnAHandComputedCase) {
  // q0 = {e1, e2}; q1 = {e1, padding}; d0 = {e1, (0.6, 0.8)}; d1 = {e2, padding e1}.
  auto q = torch::tensor({1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0}, torch::kDouble).view({2, 2, 2});
  auto qm = torch::tensor({1, 1, 1, 0}).view({2, 2}).to(torch::kBool);
  auto d = torch::tensor({1.0, 0.0, 0.6, 0.8, 0.0, 1.0, 1.0, 0.0}, torch::kDouble).view({2, 2, 2});
  auto dm = torch::tensor({1, 1, 1, 0}).view({2, 2}).to(torch::kBool);
  auto s = spread::maxsim_scores(q, qm, d, dm);
  // s(q0,d0) = 1 + 0.8, s(q0,d1) = 0 + 1, s(q1,d0) = 1, s(q1,d1) = 0.
  EXPECT_NEAR(s[0][0].item<double>(), 1.8, 1e-15);
  EXPECT_NEAR(s[0][1].item<double>(), 1.0, 1e-15);
  EXPECT_NEAR(s[1][0].item<double>(), 1.0, 1e-15);
  EXPECT_NEAR(s[1][1].item<double>(), 0.0, 1e-15);
  const double expected = 0.5 * (std::log(std::exp(1.8) + std::exp(1.0)) - 1.8 + std::log(std::exp(1.0) + 1.0) - 0.0);
  EXPECT_NEAR(spread::maxsim_contrastive_loss(s).item<double>(), expected, 1e-12);
  // Temperature divides the scores; with hard negatives (N = 2) the positive of query i is column 2i.
  const double t = 0.5;
  const double tempered = 0.5 * (std::log(std::exp(1.8 / t) + std::exp(1.0 / t)) - 1.8 / t +
                                 std::log(std::exp(1.0 / t) + 1.0) - 0.0);
  EXPECT_NEAR(spread::maxsim_contrastive_loss(s, t).item<double>(), tempered, 1e-12);
  auto s4 = torch::tensor({3.0, 1.0, 2.0, 0.0, 0.5, 0.0, 1.5, 1.0}, torch::kDouble).view({2, 4});
  const double with_negatives = 0.5 * (std::log(std::exp(3.0) + std::exp(1.0) + std::exp(2.0) + 1.0) - 3.0 +
                                       std::log(std::exp(0.5) + 1.0 + std::exp(1.5) + std::exp(1.0)) - 1.5);
  EXPECT_NEAR(spread::maxsim_contrastive_loss(s4).item<double>(), with_negatives, 1e-12);
  EXPECT_THROW(spread::maxsim_contrastive_loss(torch::zeros({2, 3})), std::invalid_argument);
  EXPECT_THROW(spread::maxsim_contrastive_loss(s, 0.0), std::invalid_argument);
}

struct PooledCase {
  torch::Tensor tokens, mask;
  spread::WardBatch assignment;
};

// Two documents of 9 and 6 valid tokens (the second right-padded, plus one masked token in the middle of the first
// as a skiplist leaves), pool factor 2, one protected token.
PooledCase pooled_case() {
  PooledCase c;
  c.tokens = unit_rows({2, 9, 6}, 7).requires_grad_(true);
  c.mask = torch::ones({2, 9}, torch::kBool);
  c.mask[0][4] = false;
  c.mask[1].narrow(0, 6, 3).fill_(false);
  spread::WardPoolOptions opt;
  opt.protected_tokens = 1;
  c.assignment = spread::ward_pool_batch(c.tokens.detach(), c.mask, spread::WardBudget::pool_factor(2), opt);
  return c;
}

TEST(WardSte, ForwardValuesAreThePooledVectors) {
  PooledCase c = pooled_case();
  for (auto ste : {spread::WardSte::kMean, spread::WardSte::kIdentity}) {
    auto out = spread::pooled_with_gradient(c.tokens, c.mask, c.assignment, ste);
    EXPECT_TRUE(torch::allclose(out.detach(), c.assignment.vectors, 0, 1e-12));
  }
  EXPECT_EQ(spread::parse_ward_ste("identity"), spread::WardSte::kIdentity);
  EXPECT_THROW(spread::parse_ward_ste("straight"), std::invalid_argument);
}

// The gradient each token should receive for an upstream gradient G on the pooled rows, from the definitions:
// protected rows pass G; mean: d normalize(m)/dm = (I - p p^T) / ||m||, m = s / |c|, so a member gets
// (G_c - p (p . G_c)) / (|c| ||m||); identity: a member gets G_c; padding and masked tokens get 0.
torch::Tensor expected_gradient(const PooledCase& c, const torch::Tensor& G, spread::WardSte ste) {
  auto expected = torch::zeros_like(c.tokens);
  auto tokens = c.tokens.detach();
  for (int64_t b = 0; b < tokens.size(0); ++b) {
    int64_t protected_rows = 0;
    std::map<int64_t, std::vector<int64_t>> members;
    for (int64_t t = 0; t < tokens.size(1); ++t) {
      if (!c.mask[b][t].item<bool>()) continue;
      const int64_t label = c.assignment.labels[b][t].item<int64_t>();
      if (label < 0) expected[b][t] = G[b][protected_rows++];
      else members[label].push_back(t);
    }
    for (const auto& [label, ts] : members) {
      auto g = G[b][protected_rows + label];
      auto m = torch::zeros({tokens.size(2)}, torch::kDouble);
      for (int64_t t : ts) m += tokens[b][t];
      m /= double(ts.size());
      auto p = m / m.norm();
      auto share = (g - p * p.dot(g)) / (double(ts.size()) * m.norm());
      for (int64_t t : ts) expected[b][t] = ste == spread::WardSte::kMean ? share : g;
    }
  }
  return expected;
}

TEST(WardSte, GradientsOfBothModesMatchTheirDefinitions) {
  for (auto ste : {spread::WardSte::kMean, spread::WardSte::kIdentity}) {
    PooledCase c = pooled_case();
    torch::manual_seed(11);
    auto G = torch::randn(c.assignment.vectors.sizes(), torch::kDouble);
    (spread::pooled_with_gradient(c.tokens, c.mask, c.assignment, ste) * G).sum().backward();
    EXPECT_TRUE(torch::allclose(c.tokens.grad(), expected_gradient(c, G, ste), 1e-9, 1e-12))
        << (ste == spread::WardSte::kMean ? "mean" : "identity");
  }
}

TEST(WardSte, MeanModeMatchesFiniteDifferences) {
  PooledCase c = pooled_case();
  torch::manual_seed(12);
  auto G = torch::randn(c.assignment.vectors.sizes(), torch::kDouble);
  auto f = [&](const torch::Tensor& x) {
    return (spread::pooled_with_gradient(x, c.mask, c.assignment, spread::WardSte::kMean) * G).sum().item<double>();
  };
  (spread::pooled_with_gradient(c.tokens, c.mask, c.assignment, spread::WardSte::kMean) * G).sum().backward();
  auto x = c.tokens.detach().clone();
  const double h = 1e-6;
  for (int64_t t : {0, 1, 3, 5, 8})
    for (int64_t k : {0, 3}) {
      auto plus = x.clone(), minus = x.clone();
      plus[0][t][k] += h;
      minus[0][t][k] -= h;
      EXPECT_NEAR(c.tokens.grad()[0][t][k].item<double>(), (f(plus) - f(minus)) / (2 * h), 1e-7) << t << "," << k;
    }
}

// A tiny encoder with a multi-vector head and a batch of 3 queries x (positive + 1 hard negative) documents.
struct StepCase {
  spread::Transformer model{nullptr};
  spread::MaxSimBatch batch;
};

StepCase step_case() {
  torch::manual_seed(5);
  spread::TransformerConfig cfg;
  cfg.vocab_size = 30;
  cfg.n_layer = 1;
  cfg.n_head = 2;
  cfg.n_embd = 16;
  cfg.block_size = 24;
  cfg.causal = false;
  cfg.head_dim = 8;
  StepCase c{spread::Transformer(cfg), {}};
  spread::SpecialIds special{24, 25, 26, 27};
  special.query = 28;
  special.document = 29;
  std::vector<std::vector<int32_t>> q = {{25, 28, 1, 2, 26}, {25, 28, 3, 26}, {25, 28, 4, 5, 6, 26}};
  std::vector<std::vector<int32_t>> d;
  for (int i = 0; i < 6; ++i) {
    d.push_back({25, 29});
    for (int k = 0; k < 6 + 3 * i; ++k) d.back().push_back(int32_t((7 * i + 3 * k) % 20 + 1));
    d.back().push_back(26);
  }
  std::vector<const std::vector<int32_t>*> qp, dp;
  for (auto& s : q) qp.push_back(&s);
  for (auto& s : d) dp.push_back(&s);
  spread::MultiVectorSpec spec;
  spec.query_length = 8;
  c.batch = {spread::query_batch(qp, special, spec), spread::document_batch(dp, special, spec)};
  return c;
}

std::vector<torch::Tensor> gradients_of(StepCase& c, double w_full, double w_pooled) {
  c.model->zero_grad();
  spread::MaxSimStepOptions opt;
  opt.pooling_aware = true;
  opt.pool_factor = 2;
  opt.weight_full = w_full;
  opt.weight_pooled = w_pooled;
  spread::maxsim_step(c.model, c.batch, opt);
  std::vector<torch::Tensor> g;
  for (auto& p : c.model->parameters()) g.push_back(p.grad().clone());
  return g;
}

TEST(PoolingAware, TheLossIsTheWeightedSumAndItsGradientReachesEveryParameter) {
  StepCase c = step_case();
  auto full = gradients_of(c, 1, 0), pooled = gradients_of(c, 0, 1), both = gradients_of(c, 2, 0.5);
  ASSERT_EQ(full.size(), both.size());
  double pooled_norm = 0;
  for (size_t i = 0; i < both.size(); ++i) {
    const double scale = both[i].abs().max().item<double>();
    EXPECT_LT((both[i] - (2 * full[i] + 0.5 * pooled[i])).abs().max().item<double>(), 1e-5 * scale + 1e-9) << i;
    pooled_norm += pooled[i].norm().item<double>();
  }
  EXPECT_GT(pooled_norm, 0);  // the pooled term reaches the model through the straight-through rows
  EXPECT_GT(c.model->head->weight.grad().defined() ? 1 : 0, 0);
  // The pooled term's value is the loss of the pooled vectors computed on their own, from the same pass.
  torch::NoGradGuard no_grad;
  spread::MaxSimStepOptions opt;
  opt.pooling_aware = true;
  opt.pool_factor = 2;
  opt.grad_scale = 0;
  auto loss = spread::maxsim_step(c.model, c.batch, opt);
  auto q = spread::encode_tokens(c.model, c.batch.queries), d = spread::encode_tokens(c.model, c.batch.documents);
  auto w = spread::ward_pool_batch(d, c.batch.documents.score, spread::WardBudget::pool_factor(2), opt.ward);
  auto direct = spread::maxsim_contrastive_loss(
      spread::maxsim_scores(q, c.batch.queries.score, w.vectors.to(torch::kFloat), w.mask));
  EXPECT_NEAR(loss.pooled.item<double>(), direct.item<double>(), 1e-5);
  EXPECT_NEAR(loss.total.item<double>(), loss.full.item<double>() + loss.pooled.item<double>(), 1e-6);
  EXPECT_NE(loss.pooled.item<double>(), loss.full.item<double>());
}

TEST(MultiVector, MarkersExpansionAndSkiplistShapeTheBatches) {
  auto tokenizer = spread::with_special_tokens(spread::make_char_tokenizer("ab,. "));
  const auto s = tokenizer->special_ids();  // base ids 0..4, reserved 5..10
  ASSERT_TRUE(s.has_markers());
  EXPECT_EQ(tokenizer->vocab_size(), 5 + 6);
  const int32_t a = tokenizer->encode("a").front(), b = tokenizer->encode("b").front();
  spread::MultiVectorSpec spec;
  spec.query_length = 6;
  spec.document_length = 5;
  auto q = spread::query_tokens(*tokenizer, "ab", spec);
  EXPECT_EQ(q, (std::vector<int32_t>{s.cls, s.query, a, b, s.sep}));
  // Truncation keeps both markers and the [SEP].
  EXPECT_EQ(spread::document_tokens(*tokenizer, "abab", spec), (std::vector<int32_t>{s.cls, s.document, a, b, s.sep}));
  auto d = spread::document_tokens(*tokenizer, "a,", spec);
  // Expansion: queries padded with [MASK] to query_length, not attended to, all scored.
  auto qb = spread::query_batch({&q}, s, spec);
  EXPECT_EQ(qb.ids[0][5].item<int64_t>(), s.mask);
  EXPECT_FALSE(qb.attend[0][5].item<bool>());
  EXPECT_TRUE(qb.score.all().item<bool>());
  spec.query_expansion = false;
  auto plain = spread::query_batch({&q}, s, spec);
  EXPECT_EQ(plain.ids.size(1), 5);
  EXPECT_TRUE(torch::equal(plain.score, plain.attend));
  // Skiplist: the comma is attended to but does not score; "." and "," are punctuation, letters and space are not.
  spec.skip = spread::punctuation_ids(*tokenizer);
  const int32_t comma = tokenizer->encode(",").front();
  EXPECT_TRUE(spec.skip[size_t(comma)]);
  EXPECT_TRUE(spec.skip[size_t(tokenizer->encode(".").front())]);
  EXPECT_FALSE(spec.skip[size_t(tokenizer->encode("a").front())]);
  EXPECT_FALSE(spec.skip[size_t(tokenizer->encode(" ").front())]);
  auto db = spread::document_batch({&d}, s, spec);
  ASSERT_EQ(db.ids[0][3].item<int64_t>(), comma);
  EXPECT_TRUE(db.attend[0][3].item<bool>());
  EXPECT_FALSE(db.score[0][3].item<bool>());
  EXPECT_TRUE(db.score[0][2].item<bool>());
}

}  // namespace
