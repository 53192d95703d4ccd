// In-batch InfoNCE (docs/design.md §5) against hand-worked formulas, an independent scalar reference written out below
// (plain loops over std::vector<double>, no LibTorch), central finite differences, and a PyTorch fixture written the
// way sentence-transformers writes MultipleNegatives(Symmetric)RankingLoss and MatryoshkaLoss
// (tests/oracles/gen_contrastive_fixtures.py).
#include <gtest/gtest.h>
#include "test_paths.h"
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "spread/losses/contrastive.h"

namespace {

using spread::ContrastiveOptions;
using Vec = std::vector<double>;
using Rows = std::vector<Vec>;

// ---- scalar reference ------------------------------------------------------------------------------------------

double cosine(const Vec& a, const Vec& b) {  // ST's util.cos_sim: normalize (eps 1e-12), then the dot product
  double ab = 0, aa = 0, bb = 0;
  for (size_t f = 0; f < a.size(); ++f) ab += a[f] * b[f], aa += a[f] * a[f], bb += b[f] * b[f];
  return ab / (std::max(std::sqrt(aa), 1e-12) * std::max(std::sqrt(bb), 1e-12));
}

double log_sum_exp(const Vec& v) {
  const double m = *std::max_element(v.begin(), v.end());
  double s = 0;
  for (double x : v) s += std::exp(x - m);
  return m + std::log(s);
}

// One batch, by role: anchor a_i, its positive p_i and its hard negatives neg[k][i]; text ids per role (empty = no
// duplicate masking on that side).
struct Batch {
  Rows anchors, positives;
  std::vector<Rows> negatives;  // [K][B]
  std::vector<int64_t> anchor_text, positive_text;
  std::vector<std::vector<int64_t>> negative_text;  // [K][B]
};

// -log softmax of a_i's positive among every positive and hard negative of the batch, minus the ones that carry
// the text of p_i (other than p_i itself); symmetric: averaged with -log softmax of a_i among all anchors for p_i.
double ref_loss(const Batch& b, double tau, bool symmetric) {
  const size_t n = b.anchors.size();
  const bool masked = !b.positive_text.empty();
  double fwd = 0, bwd = 0;
  for (size_t i = 0; i < n; ++i) {
    const double own = cosine(b.anchors[i], b.positives[i]) / tau;
    Vec row{own};
    for (size_t j = 0; j < n; ++j)
      if (j != i && !(masked && b.positive_text[j] == b.positive_text[i]))
        row.push_back(cosine(b.anchors[i], b.positives[j]) / tau);
    for (size_t k = 0; k < b.negatives.size(); ++k)
      for (size_t j = 0; j < n; ++j)
        if (!(masked && b.negative_text[k][j] == b.positive_text[i]))
          row.push_back(cosine(b.anchors[i], b.negatives[k][j]) / tau);
    fwd += log_sum_exp(row) - own;

    Vec column{own};
    for (size_t j = 0; j < n; ++j)
      if (j != i && !(!b.anchor_text.empty() && b.anchor_text[j] == b.anchor_text[i]))
        column.push_back(cosine(b.anchors[j], b.positives[i]) / tau);
    bwd += log_sum_exp(column) - own;
  }
  fwd /= double(n), bwd /= double(n);
  return symmetric ? (fwd + bwd) / 2 : fwd;
}

Rows prefix(const Rows& rows, size_t m) {
  Rows out;
  for (const auto& r : rows) out.emplace_back(r.begin(), r.begin() + long(m));
  return out;
}

Batch prefix(const Batch& b, size_t m) {
  Batch out = b;
  out.anchors = prefix(b.anchors, m);
  out.positives = prefix(b.positives, m);
  for (auto& neg : out.negatives) neg = prefix(neg, m);
  return out;
}

// ---- the unit's layout -----------------------------------------------------------------------------------------

torch::Tensor tensor_of(const Rows& rows) {  // [n, d] float64
  torch::Tensor t = torch::empty({int64_t(rows.size()), int64_t(rows[0].size())}, torch::kFloat64);
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t f = 0; f < rows[i].size(); ++f) t[long(i)][long(f)] = rows[i][f];
  return t;
}

Rows rows_of(const torch::Tensor& t) {
  torch::Tensor c = t.to(torch::kFloat64).contiguous();
  Rows out;
  for (int64_t i = 0; i < c.size(0); ++i)
    out.emplace_back(c[i].data_ptr<double>(), c[i].data_ptr<double>() + c.size(1));
  return out;
}

// candidates = [p_1..p_B, n^1_1..n^1_B, ..., n^K_1..n^K_B]
torch::Tensor candidates_of(const Batch& b) {
  Rows all = b.positives;
  for (const auto& neg : b.negatives) all.insert(all.end(), neg.begin(), neg.end());
  return tensor_of(all);
}

torch::Tensor candidate_ids_of(const Batch& b) {
  std::vector<int64_t> ids = b.positive_text;
  for (const auto& neg : b.negative_text) ids.insert(ids.end(), neg.begin(), neg.end());
  return torch::tensor(ids, torch::kLong);
}

double ours(const Batch& b, const ContrastiveOptions& o, torch::ScalarType dtype = torch::kFloat64) {
  torch::Tensor aid = b.anchor_text.empty() ? torch::Tensor() : torch::tensor(b.anchor_text, torch::kLong);
  torch::Tensor cid = b.positive_text.empty() ? torch::Tensor() : candidate_ids_of(b);
  return spread::info_nce(tensor_of(b.anchors).to(dtype), candidates_of(b).to(dtype), o, aid, cid).item<double>();
}

ContrastiveOptions options(double tau, bool symmetric = false, std::vector<int64_t> dims = {}) {
  ContrastiveOptions o;
  o.temperature = tau;
  o.symmetric = symmetric;
  o.matryoshka_dims = std::move(dims);
  return o;
}

// Anchors with positives near them and hard negatives a little further, so no term saturates.
Batch random_batch(int64_t n, int64_t k, int64_t d, uint64_t seed) {
  torch::manual_seed(seed);
  torch::Tensor a = torch::randn({n, d}, torch::kFloat64);
  Batch b;
  b.anchors = rows_of(a);
  b.positives = rows_of(a + 0.7 * torch::randn({n, d}, torch::kFloat64));
  for (int64_t j = 0; j < k; ++j) b.negatives.push_back(rows_of(a + 1.2 * torch::randn({n, d}, torch::kFloat64)));
  return b;
}

torch::Tensor finite_difference(const torch::Tensor& x, const std::function<double(const torch::Tensor&)>& f,
                                double h = 1e-6) {
  torch::Tensor g = torch::zeros_like(x);
  torch::Tensor flat = x.detach().clone().contiguous();
  double* p = flat.data_ptr<double>();
  for (int64_t i = 0; i < flat.numel(); ++i) {
    const double keep = p[i];
    p[i] = keep + h;
    const double up = f(flat);
    p[i] = keep - h;
    const double down = f(flat);
    p[i] = keep;
    g.view(-1)[i] = (up - down) / (2 * h);
  }
  return g;
}

}  // namespace

// ---- hand-worked cases -----------------------------------------------------------------------------------------

// a_1 = (3, 0), a_2 = (0, 2), p_1 = (1, 1), p_2 = (-1, sqrt 3): cos(a_1, p_1) = cos(a_2, p_1) = 1/sqrt 2,
// cos(a_1, p_2) = -1/2, cos(a_2, p_2) = sqrt(3)/2; tau = 1/2 doubles each cosine.
static Batch two_by_two() {
  Batch b;
  b.anchors = {{3, 0}, {0, 2}};
  b.positives = {{1, 1}, {-1, std::sqrt(3.0)}};
  return b;
}

TEST(Contrastive, TwoByTwoMatchesTheHandFormula) {
  const double r2 = std::sqrt(2.0), r3 = std::sqrt(3.0);
  const double row1 = std::log(std::exp(r2) + std::exp(-1.0)) - r2;
  const double row2 = std::log(std::exp(r2) + std::exp(r3)) - r3;
  EXPECT_NEAR(ours(two_by_two(), options(0.5)), (row1 + row2) / 2, 1e-14);
  EXPECT_NEAR(ours(two_by_two(), options(0.5), torch::kFloat32), (row1 + row2) / 2, 1e-6);
}

TEST(Contrastive, SymmetricTwoByTwoMatchesTheHandFormula) {
  const double r2 = std::sqrt(2.0), r3 = std::sqrt(3.0);
  const double fwd = (std::log(std::exp(r2) + std::exp(-1.0)) - r2 + std::log(std::exp(r2) + std::exp(r3)) - r3) / 2;
  // p_1 scores sqrt 2 against both anchors (log 2); p_2 scores -1 against a_1 and sqrt 3 against a_2.
  const double bwd = (std::log(2.0) + std::log(std::exp(-1.0) + std::exp(r3)) - r3) / 2;
  EXPECT_NEAR(ours(two_by_two(), options(0.5, true)), (fwd + bwd) / 2, 1e-14);
}

TEST(Contrastive, OneAnchorWithTwoHardNegativesMatchesTheHandFormula) {
  // a = (2, 0, 0); p = (1, 1, 0): cos 1/sqrt 2; n^1 = (1, 2, 0): 1/sqrt 5; n^2 = (3, -1, 2): 3/sqrt 14, a hard
  // negative closer to the anchor than its positive. Default tau = 0.05 (scale 20).
  Batch b;
  b.anchors = {{2, 0, 0}};
  b.positives = {{1, 1, 0}};
  b.negatives = {{{1, 2, 0}}, {{3, -1, 2}}};
  const double s_p = 20 / std::sqrt(2.0), s_1 = 20 / std::sqrt(5.0), s_2 = 20 * 3 / std::sqrt(14.0);
  const double expected = std::log(std::exp(s_p) + std::exp(s_1) + std::exp(s_2)) - s_p;
  EXPECT_NEAR(ours(b, ContrastiveOptions{}), expected, 1e-12);
  EXPECT_NEAR(ours(b, ContrastiveOptions{}, torch::kFloat32), expected, 2e-5);
}

TEST(Contrastive, CoincidingEmbeddingsGiveLogOfTheCandidateCount) {
  Batch b;
  b.anchors = {{1, 2, 2}, {2, 4, 4}, {0.5, 1, 1}};
  b.positives = b.anchors;
  b.negatives = {b.anchors, b.anchors};
  EXPECT_NEAR(ours(b, options(0.05)), std::log(9.0), 1e-12);
  EXPECT_NEAR(ours(b, options(0.05, true)), (std::log(9.0) + std::log(3.0)) / 2, 1e-12);  // bwd: 3 anchors
}

TEST(Contrastive, AnOnlyDuplicateLeavesEachAnchorWithItsPositiveAlone) {
  // p_2 is the same text as p_1: masked, each row keeps one column and its CE is 0; unmasked, log 2 per row.
  Batch b;
  b.anchors = {{1, 0}, {0.6, 0.8}};
  b.positives = {{1, 1}, {1, 1}};
  EXPECT_NEAR(ours(b, options(0.05)), std::log(2.0), 1e-12);
  b.positive_text = {7, 7};
  EXPECT_NEAR(ours(b, options(0.05)), 0.0, 1e-15);
}

// ---- random inputs against the scalar reference ----------------------------------------------------------------

TEST(Contrastive, MatchesTheScalarReferenceWithHardNegatives) {
  for (int64_t k : {0, 1, 3}) {
    Batch b = random_batch(5, k, 8, 11 + uint64_t(k));
    for (double tau : {0.05, 0.3}) {
      for (bool symmetric : {false, true}) {
        const double ref = ref_loss(b, tau, symmetric);
        EXPECT_NEAR(ours(b, options(tau, symmetric)), ref, 1e-12 * std::max(1.0, ref)) << k << " " << tau;
        EXPECT_NEAR(ours(b, options(tau, symmetric), torch::kFloat32), ref, 1e-5 * std::max(1.0, ref)) << k;
      }
    }
  }
}

TEST(Contrastive, LowPrecisionInputIsScoredInFloat32) {
  Batch b = random_batch(6, 2, 16, 5);
  torch::Tensor a = tensor_of(b.anchors).to(torch::kBFloat16), c = candidates_of(b).to(torch::kBFloat16);
  torch::Tensor loss = spread::info_nce(a, c, ContrastiveOptions{});
  EXPECT_EQ(loss.scalar_type(), torch::kFloat32);
  // The reference on the bf16-rounded embeddings: only the inputs are rounded, not the scores.
  Batch rounded = b;
  rounded.anchors = rows_of(a);
  Rows cand = rows_of(c);
  rounded.positives.assign(cand.begin(), cand.begin() + 6);
  rounded.negatives = {Rows(cand.begin() + 6, cand.begin() + 12), Rows(cand.begin() + 12, cand.end())};
  const double ref = ref_loss(rounded, 0.05, false);
  EXPECT_NEAR(loss.item<double>(), ref, 1e-5 * std::max(1.0, ref));
  EXPECT_GT(std::abs(ref_loss(b, 0.05, false) - ref), 1e-4);  // the rounding itself is visible at this scale
}

TEST(Contrastive, DuplicateTextsLeaveTheSoftmax) {
  Batch b = random_batch(4, 1, 5, 21);
  // p_3 repeats p_1's text (so its embedding), and anchor 2's hard negative is that text too.
  b.positives[3] = b.positives[1];
  b.negatives[0][2] = b.positives[1];
  b.positive_text = {0, 1, 2, 1};
  b.negative_text = {{10, 11, 1, 13}};
  // anchors 0 and 2 are one text: p_0 and p_2 each lose the other's anchor in the symmetric term.
  b.anchors[2] = b.anchors[0];
  b.anchor_text = {20, 21, 20, 23};
  for (bool symmetric : {false, true}) {
    const double ref = ref_loss(b, 0.05, symmetric);
    EXPECT_NEAR(ours(b, options(0.05, symmetric)), ref, 1e-12 * std::max(1.0, ref)) << symmetric;
    Batch unmasked = b;
    unmasked.positive_text.clear(), unmasked.negative_text.clear(), unmasked.anchor_text.clear();
    EXPECT_GT(std::abs(ours(unmasked, options(0.05, symmetric)) - ref), 1e-3) << symmetric;  // masking matters
  }
}

TEST(Contrastive, DuplicateMaskingEqualsDroppingTheColumn) {
  // Row 0's only duplicate is column 2 (p_2 = p_0's text); no other row has one. So the masked loss is row 0's CE
  // without that column plus the other rows' CE over every column, written out with the scalar cosine.
  Batch b = random_batch(3, 0, 6, 31);
  b.positives[2] = b.positives[0];
  b.positive_text = {5, 6, 5};
  const double tau = 0.1;
  auto s = [&](size_t i, size_t j) { return cosine(b.anchors[i], b.positives[j]) / tau; };
  const double row0 = log_sum_exp({s(0, 0), s(0, 1)}) - s(0, 0);
  const double row1 = log_sum_exp({s(1, 0), s(1, 1), s(1, 2)}) - s(1, 1);
  const double row2 = log_sum_exp({s(2, 1), s(2, 2)}) - s(2, 2);  // p_0 = p_2's text leaves row 2 as well
  EXPECT_NEAR(ours(b, options(tau)), (row0 + row1 + row2) / 3, 1e-12);
}

TEST(Contrastive, MatryoshkaIsTheSumOverPrefixWidths) {
  Batch b = random_batch(4, 2, 12, 41);
  b.anchors[1][0] = 0;  // prefixes have other norms and directions than the full rows
  const std::vector<int64_t> dims{12, 6, 2};
  for (bool symmetric : {false, true}) {
    double ref = 0;
    for (int64_t m : dims) ref += ref_loss(prefix(b, size_t(m)), 0.05, symmetric);
    EXPECT_NEAR(ours(b, options(0.05, symmetric, dims)), ref, 1e-12 * ref) << symmetric;
  }
  // Without the full width listed, it does not enter.
  EXPECT_NEAR(ours(b, options(0.05, false, {3})), ref_loss(prefix(b, 3), 0.05, false), 1e-12);
}

TEST(Contrastive, GradientsMatchFiniteDifferences) {
  Batch b = random_batch(3, 2, 4, 51);
  b.positives[2] = b.positives[0];
  b.positive_text = {1, 2, 1};
  b.negative_text = {{3, 4, 5}, {6, 1, 7}};
  b.anchor_text = {8, 8, 9};
  const torch::Tensor aid = torch::tensor(b.anchor_text, torch::kLong), cid = candidate_ids_of(b);
  const torch::Tensor a0 = tensor_of(b.anchors), c0 = candidates_of(b);
  for (const auto& o : {options(0.1), options(0.1, true), options(0.2, true, {4, 2})}) {
    torch::Tensor a = a0.clone().requires_grad_(true), c = c0.clone().requires_grad_(true);
    spread::info_nce(a, c, o, aid, cid).backward();
    auto of_a = [&](const torch::Tensor& x) { return spread::info_nce(x, c0, o, aid, cid).item<double>(); };
    auto of_c = [&](const torch::Tensor& x) { return spread::info_nce(a0, x, o, aid, cid).item<double>(); };
    EXPECT_TRUE(torch::allclose(a.grad(), finite_difference(a0, of_a), 1e-6, 1e-7)) << o.symmetric;
    EXPECT_TRUE(torch::allclose(c.grad(), finite_difference(c0, of_c), 1e-6, 1e-7)) << o.symmetric;
    EXPECT_GT(a.grad().abs().max().item<double>(), 1e-2);
  }
}

// ---- the PyTorch fixture (tests/oracles/gen_contrastive_fixtures.py) -------------------------------------------

TEST(Contrastive, MatchesSentenceTransformersLossesInPyTorch) {
  std::ifstream in(std::string(SPREAD_TEST_DATA_DIR) + "/contrastive/fixture.json");
  ASSERT_TRUE(in) << "missing tests/data/contrastive/fixture.json";
  const nlohmann::json fx = nlohmann::json::parse(in);
  auto matrix = [](const nlohmann::json& j) { return tensor_of(j.get<Rows>()); };
  const torch::Tensor a0 = matrix(fx["anchors"]), c0 = matrix(fx["candidates"]);
  const torch::Tensor aid = torch::tensor(fx["anchor_ids"].get<std::vector<int64_t>>(), torch::kLong);
  const torch::Tensor cid = torch::tensor(fx["candidate_ids"].get<std::vector<int64_t>>(), torch::kLong);
  ASSERT_EQ(fx["cases"].size(), 7u);
  for (const auto& cs : fx["cases"]) {
    const std::string name = cs["name"];
    ContrastiveOptions o = options(1.0 / cs["scale"].get<double>(), cs["symmetric"].get<bool>(),
                                   cs["matryoshka_dims"].get<std::vector<int64_t>>());
    const bool masked = cs["masked"].get<bool>();
    torch::Tensor a = a0.clone().requires_grad_(true), c = c0.clone().requires_grad_(true);
    torch::Tensor loss = spread::info_nce(a, c, o, masked ? aid : torch::Tensor(), masked ? cid : torch::Tensor());
    loss.backward();
    EXPECT_NEAR(loss.item<double>(), cs["loss"].get<double>(), 1e-12) << name;
    EXPECT_TRUE(torch::allclose(a.grad(), matrix(cs["grad_anchors"]), 1e-9, 1e-12)) << name;
    EXPECT_TRUE(torch::allclose(c.grad(), matrix(cs["grad_candidates"]), 1e-9, 1e-12)) << name;
    // float32 embeddings against the float64 fixture.
    torch::Tensor loss32 = spread::info_nce(a0.to(torch::kFloat32), c0.to(torch::kFloat32), o,
                                            masked ? aid : torch::Tensor(), masked ? cid : torch::Tensor());
    EXPECT_NEAR(loss32.item<double>(), cs["loss"].get<double>(), 2e-5 * std::max(1.0, loss32.item<double>())) << name;
  }
}

// ---- input checks ----------------------------------------------------------------------------------------------

TEST(Contrastive, RejectsBadOptionsAndShapes) {
  torch::Tensor a = torch::randn({3, 4}), c = torch::randn({6, 4});
  for (double tau : {0.0, -0.05, std::nan("")})
    EXPECT_THROW(spread::info_nce(a, c, options(tau)), std::invalid_argument) << tau;
  EXPECT_THROW(spread::info_nce(a, c, options(0.05, false, {0})), std::invalid_argument);
  try {
    spread::info_nce(a, c, options(0.05, false, {2, 5}));
    ADD_FAILURE() << "a width above the embedding's was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("exceeds the embedding width 4"), std::string::npos) << e.what();
  }
  EXPECT_THROW(spread::info_nce(a, torch::randn({7, 4}), options(0.05)), c10::Error);  // not B (1 + K) rows
  EXPECT_THROW(spread::info_nce(a, torch::randn({2, 4}), options(0.05)), c10::Error);  // fewer than B
  EXPECT_THROW(spread::info_nce(a, torch::randn({6, 5}), options(0.05)), c10::Error);
  EXPECT_THROW(spread::info_nce(a, c, options(0.05), torch::Tensor(), torch::zeros({3}, torch::kLong)), c10::Error);
  EXPECT_NO_THROW(spread::check_contrastive_options(options(0.05, false, {1024})));  // no width given: not checked
}
