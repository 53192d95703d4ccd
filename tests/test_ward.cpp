// Ward token pooling (docs/design.md §6.3) against SciPy: trees, heights (1e-12) and flat clusters from
// tests/oracles/gen_ward_fixtures.py (n in {2, 3, 17, 180, 300}, ties and duplicate vectors, cosine and euclidean
// distances); the budgets' edge cases; pooled rows against cluster means computed here; batches against single
// documents; the calibration against the fixture's heights.
#include <gtest/gtest.h>
#include "test_paths.h"
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "spread/data/npy.h"
#include "spread/pooling/ward.h"
#include "spread/pooling/ward_batch.h"

namespace {

using nlohmann::json;
using spread::RowMatrixXd;
using spread::WardBudget;
using spread::WardDistance;
using spread::WardPoolOptions;

const std::string kDir = std::string(SPREAD_TEST_DATA_DIR) + "/ward/";

const json& fixtures() {
  static const json j = [] {
    std::ifstream in(kDir + "expected.json");
    return json::parse(in);
  }();
  return j;
}

RowMatrixXd vectors_of(const json& c) { return spread::read_npy_matrix(kDir + c["file"].get<std::string>()); }

const json& case_named(const std::string& name) {
  for (const json& c : fixtures()["cases"])
    if (c["name"] == name) return c;
  throw std::runtime_error("no fixture case " + name);
}

struct Mode {
  const char* name;
  WardDistance distance;
};
const Mode kModes[] = {{"cosine", WardDistance::kCosine}, {"euclidean", WardDistance::kEuclidean}};

// f(case, mode, expected results of that case in that mode) for every fixture case and distance mode.
template <class F>
void for_each_case(F f) {
  for (const json& c : fixtures()["cases"])
    for (const Mode& mode : kModes) {
      SCOPED_TRACE(c["name"].get<std::string>() + " " + mode.name);
      f(c, mode, c[mode.name]);
    }
}

spread::WardLinkage linkage_of(const RowMatrixXd& y, WardDistance mode) {
  return spread::ward_linkage(spread::ward_distances(y, mode));
}

std::vector<int64_t> with_protected(int64_t protected_count, const std::vector<int64_t>& labels) {
  std::vector<int64_t> out(size_t(protected_count), -1);
  out.insert(out.end(), labels.begin(), labels.end());
  return out;
}

RowMatrixXd stack(const RowMatrixXd& top, const RowMatrixXd& bottom) {
  RowMatrixXd out(top.rows() + bottom.rows(), std::max(top.cols(), bottom.cols()));
  out << top, bottom;
  return out;
}

// A protected row that is neither unit nor like any fixture row, so that it cannot pass by accident.
RowMatrixXd protected_row(int64_t d) { return RowMatrixXd::Constant(1, d, 3.0); }

// The cluster means of docs/design.md §6.3 step 6, computed here from labels: normalize(sum / count).
RowMatrixXd expected_means(const RowMatrixXd& y, const std::vector<int64_t>& labels) {
  const int64_t k = *std::max_element(labels.begin(), labels.end()) + 1;
  RowMatrixXd sums = RowMatrixXd::Zero(k, y.cols());
  std::vector<double> counts(size_t(k), 0);
  for (size_t i = 0; i < labels.size(); ++i) {
    sums.row(labels[i]) += y.row(int64_t(i));
    counts[size_t(labels[i])] += 1;
  }
  for (int64_t c = 0; c < k; ++c) sums.row(c) = (sums.row(c) / counts[size_t(c)]).normalized();
  return sums;
}

// ---- the tree and its cuts against SciPy --------------------------------------------------------------------

TEST(WardLinkage, TreesHeightsAndSizesMatchScipy) {
  for_each_case([](const json& c, const Mode& mode, const json& want) {
    const spread::WardLinkage z = linkage_of(vectors_of(c), mode.distance);
    ASSERT_EQ(z.size(), want["Z"].size());
    for (size_t r = 0; r < z.size(); ++r) {
      const json& row = want["Z"][r];
      EXPECT_EQ(z[r].left, row[0].get<int64_t>()) << "merge " << r;
      EXPECT_EQ(z[r].right, row[1].get<int64_t>()) << "merge " << r;
      EXPECT_NEAR(z[r].height, row[2].get<double>(), 1e-12) << "merge " << r;
      EXPECT_EQ(z[r].size, row[3].get<int64_t>()) << "merge " << r;
    }
  });
}

// The fixture's coordinates lie on a 2^-20 grid, so every inner product is exact and the distances must equal
// NumPy's bit for bit, whatever the summation order; the linkage of SciPy's own distances must be SciPy's tree.
TEST(WardLinkage, DistancesEqualNumpysAndScipysDistancesGiveScipysTree) {
  int checked = 0;
  for_each_case([&](const json& c, const Mode& mode, const json& want) {
    if (!want.contains("condensed")) return;
    const auto condensed = want["condensed"].get<std::vector<double>>();
    EXPECT_EQ(spread::ward_distances(vectors_of(c), mode.distance), condensed);
    const spread::WardLinkage z = spread::ward_linkage(condensed);
    for (size_t r = 0; r < z.size(); ++r) EXPECT_EQ(z[r].height, want["Z"][r][2].get<double>());
    ++checked;
  });
  EXPECT_GE(checked, 12);
}

TEST(WardLinkage, MaxclustPartitionsMatchScipyTiesIncluded) {
  int fewer_than_k = 0;
  for_each_case([&](const json& c, const Mode& mode, const json& want) {
    const spread::WardLinkage z = linkage_of(vectors_of(c), mode.distance);
    for (const auto& [k_text, labels] : want["maxclust"].items()) {
      const int64_t k = std::stoll(k_text);
      const auto got = spread::cut_max_clusters(z, k);
      EXPECT_EQ(got, labels.get<std::vector<int64_t>>()) << "k = " << k;
      const std::set<int64_t> clusters(got.begin(), got.end());
      EXPECT_LE(int64_t(clusters.size()), k);
      EXPECT_EQ(*clusters.rbegin() + 1, int64_t(clusters.size())) << "an empty cluster id, k = " << k;
      fewer_than_k += int64_t(clusters.size()) < k;
    }
    std::vector<int64_t> alone(c["n"].get<size_t>());
    for (size_t i = 0; i < alone.size(); ++i) alone[i] = int64_t(i);
    EXPECT_EQ(spread::cut_max_clusters(z, int64_t(alone.size())), alone) << "k >= m leaves every row alone";
  });
  EXPECT_GT(fewer_than_k, 0) << "the fixtures should hold ties at the cut height";
}

TEST(WardLinkage, DistanceCutsMatchScipy) {
  for_each_case([](const json& c, const Mode& mode, const json& want) {
    const spread::WardLinkage z = linkage_of(vectors_of(c), mode.distance);
    for (const json& cut : want["distance"])
      EXPECT_EQ(spread::cut_distance(z, cut["tau"].get<double>()), cut["labels"].get<std::vector<int64_t>>())
          << "tau = " << cut["tau"];
  });
}

TEST(WardLinkage, RejectsWhatScipyRejects) {
  EXPECT_THROW(spread::ward_linkage({}), std::invalid_argument);
  EXPECT_THROW(spread::ward_linkage({1, 2}), std::invalid_argument);  // not m (m - 1) / 2
  EXPECT_THROW(spread::ward_linkage({1, -1, 2}), std::invalid_argument);
  EXPECT_THROW(spread::ward_linkage({1, std::nan(""), 2}), std::invalid_argument);
  EXPECT_THROW(spread::cut_max_clusters(spread::ward_linkage({1, 2, 3}), 0), std::invalid_argument);
  EXPECT_THROW(spread::parse_ward_distance("manhattan"), std::invalid_argument);
}

// ---- pooling one document ------------------------------------------------------------------------------------

TEST(WardPool, PoolFactorGivesScipysClustersAfterTheProtectedToken) {
  for_each_case([](const json& c, const Mode& mode, const json& want) {
    const RowMatrixXd y = vectors_of(c);
    const int64_t m = y.rows();
    if (m < 4) return;
    WardPoolOptions opt;
    opt.distance = mode.distance;
    const RowMatrixXd tokens = stack(protected_row(y.cols()), y);
    const spread::WardPooled out = spread::ward_pool(tokens, WardBudget::pool_factor(4), opt);
    const auto labels = want["maxclust"][std::to_string(m / 4)].get<std::vector<int64_t>>();
    EXPECT_EQ(out.labels, with_protected(1, labels));
    const RowMatrixXd means = expected_means(y, labels);
    ASSERT_EQ(out.vectors.rows(), 1 + means.rows());
    EXPECT_EQ(out.vectors.row(0), tokens.row(0)) << "the protected row comes first, unchanged";
    EXPECT_LT((out.vectors.bottomRows(means.rows()) - means).cwiseAbs().maxCoeff(), 1e-12);
    for (int64_t r = 1; r < out.vectors.rows(); ++r) EXPECT_NEAR(out.vectors.row(r).norm(), 1.0, 1e-12);
  });
}

TEST(WardPool, DistanceThresholdGivesScipysCut) {
  for_each_case([](const json& c, const Mode& mode, const json& want) {
    WardPoolOptions opt;
    opt.distance = mode.distance;
    opt.protected_tokens = 0;
    for (const json& cut : want["distance"]) {
      const auto out =
          spread::ward_pool(vectors_of(c), WardBudget::distance_threshold(cut["tau"].get<double>()), opt);
      EXPECT_EQ(out.labels, cut["labels"].get<std::vector<int64_t>>()) << "tau = " << cut["tau"];
    }
  });
}

// max_tokens counts the protected tokens: n = m + 1 tokens under T = m leave k = T - 1 = m - 1 clusters, the case
// SciPy <= 1.14 got wrong (it merged past the lowest height).
TEST(WardPool, MaxTokensCountsProtectedTokens) {
  for_each_case([](const json& c, const Mode& mode, const json& want) {
    const RowMatrixXd y = vectors_of(c);
    const int64_t m = y.rows();
    WardPoolOptions opt;
    opt.distance = mode.distance;
    const RowMatrixXd tokens = stack(protected_row(y.cols()), y);
    const auto out = spread::ward_pool(tokens, WardBudget::max_tokens(m), opt);
    EXPECT_EQ(out.labels, with_protected(1, want["maxclust"][std::to_string(m - 1)].get<std::vector<int64_t>>()));
    EXPECT_LE(out.vectors.rows(), m);
    const auto all = spread::ward_pool(tokens, WardBudget::max_tokens(1), opt);
    EXPECT_EQ(all.labels, with_protected(1, std::vector<int64_t>(size_t(m), 0))) << "k is at least 1";
  });
}

TEST(WardPool, NoMergeCasesKeepEveryTokenNormalised) {
  const RowMatrixXd y = vectors_of(case_named("clustered_17"));
  const RowMatrixXd tokens = stack(protected_row(y.cols()), y);
  const int64_t n = tokens.rows(), m = y.rows();
  std::vector<int64_t> alone(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) alone[size_t(i)] = i;
  for (const WardBudget& b : {WardBudget::pool_factor(1), WardBudget::max_tokens(n), WardBudget::max_tokens(n + 5)}) {
    const auto out = spread::ward_pool(tokens, b);
    EXPECT_EQ(out.labels, with_protected(1, alone));
    EXPECT_EQ(out.vectors.row(0), tokens.row(0));
    EXPECT_LT((out.vectors.bottomRows(m) - y.rowwise().normalized()).cwiseAbs().maxCoeff(), 1e-15);
  }
  // m <= 1: nothing to merge, whatever the budget.
  for (int64_t rows : {0, 1, 2}) {
    const auto out = spread::ward_pool(tokens.topRows(rows), WardBudget::distance_threshold(100));
    EXPECT_EQ(out.labels, with_protected(std::min<int64_t>(rows, 1), std::vector<int64_t>(size_t(rows > 1), 0)));
    EXPECT_EQ(out.vectors.rows(), rows);
  }
  // More protected tokens than tokens: all kept as they are.
  WardPoolOptions all;
  all.protected_tokens = n + 3;
  const auto kept = spread::ward_pool(tokens, WardBudget::pool_factor(4), all);
  EXPECT_EQ(kept.labels, std::vector<int64_t>(size_t(n), -1));
  EXPECT_EQ(kept.vectors, tokens);
}

TEST(WardPool, WithoutProtectedTokensEveryTokenIsPooled) {
  const json& c = case_named("clustered_180");
  WardPoolOptions opt;
  opt.protected_tokens = 0;
  const RowMatrixXd y = vectors_of(c);
  const auto out = spread::ward_pool(y, WardBudget::pool_factor(4), opt);
  const auto labels = c["cosine"]["maxclust"]["45"].get<std::vector<int64_t>>();
  EXPECT_EQ(out.labels, labels);
  EXPECT_LT((out.vectors - expected_means(y, labels)).cwiseAbs().maxCoeff(), 1e-12);
}

TEST(WardPool, RejectsBadBudgetsAndTokens) {
  const RowMatrixXd y = vectors_of(case_named("clustered_17"));
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  for (const WardBudget& b : {WardBudget::pool_factor(0.5), WardBudget::pool_factor(nan), WardBudget::max_tokens(0),
                              WardBudget::distance_threshold(-0.1), WardBudget::distance_threshold(inf)})
    EXPECT_THROW(spread::ward_pool(y, b), std::invalid_argument);
  WardPoolOptions negative;
  negative.protected_tokens = -1;
  EXPECT_THROW(spread::ward_pool(y, WardBudget::pool_factor(2), negative), std::invalid_argument);
  RowMatrixXd bad = y;
  bad(5, 3) = nan;
  EXPECT_THROW(spread::ward_pool(bad, WardBudget::pool_factor(2)), std::invalid_argument);
}

// ---- many documents, padded batches --------------------------------------------------------------------------

std::vector<RowMatrixXd> fixture_documents(int64_t min_rows) {
  std::vector<RowMatrixXd> docs;
  for (const json& c : fixtures()["cases"]) {
    const RowMatrixXd y = vectors_of(c);
    if (y.rows() >= min_rows) docs.push_back(stack(protected_row(y.cols()), y));
  }
  return docs;
}

TEST(WardPool, ManyDocumentsOnThreadsEqualOneAtATime) {
  const auto docs = fixture_documents(1);
  const auto many = spread::ward_pool_many(docs, WardBudget::pool_factor(3), {}, 3);
  ASSERT_EQ(many.size(), docs.size());
  for (size_t i = 0; i < docs.size(); ++i) {
    const auto one = spread::ward_pool(docs[i], WardBudget::pool_factor(3));
    EXPECT_EQ(many[i].labels, one.labels);
    EXPECT_EQ(many[i].vectors, one.vectors);
  }
}

TEST(WardBatch, PaddedBatchEqualsEachDocumentAlone) {
  std::vector<RowMatrixXd> docs = fixture_documents(1);
  docs.resize(6);  // 3 to 18 tokens, protected row included
  const int64_t n = 20, d = docs[0].cols();
  torch::Tensor tokens = torch::full({int64_t(docs.size()), n, d}, 7.0, torch::kFloat64);  // padding holds garbage
  torch::Tensor mask = torch::zeros({int64_t(docs.size()), n}, torch::kBool);
  for (size_t b = 0; b < docs.size(); ++b) {
    const int64_t rows = docs[b].rows();
    tokens[int64_t(b)].narrow(0, 0, rows).copy_(torch::from_blob(docs[b].data(), {rows, d}, torch::kFloat64));
    mask[int64_t(b)].narrow(0, 0, rows).fill_(true);
  }
  for (auto dtype : {torch::kFloat64, torch::kFloat32}) {  // the fixture's values are exact in float32 as well
    const spread::WardBatch out =
        spread::ward_pool_batch(tokens.to(dtype), mask, WardBudget::distance_threshold(0.05));
    EXPECT_EQ(out.vectors.scalar_type(), dtype);
    for (size_t b = 0; b < docs.size(); ++b) {
      const auto one = spread::ward_pool(docs[b], WardBudget::distance_threshold(0.05));
      const int64_t rows = one.vectors.rows(), b64 = int64_t(b);
      EXPECT_EQ(out.mask[b64].sum().item<int64_t>(), rows);
      EXPECT_TRUE(out.mask[b64].narrow(0, 0, rows).all().item<bool>());
      const torch::Tensor want = torch::from_blob(const_cast<double*>(one.vectors.data()), {rows, d}, torch::kFloat64);
      EXPECT_TRUE(torch::allclose(out.vectors[b64].narrow(0, 0, rows).to(torch::kFloat64), want, 1e-6, 1e-7));
      EXPECT_EQ(out.vectors[b64].narrow(0, rows, out.vectors.size(1) - rows).abs().sum().item<double>(), 0.0);
      std::vector<int64_t> labels(one.labels);
      labels.resize(size_t(n), -1);  // padding is labelled -1
      const torch::Tensor got = out.labels[b64].contiguous();
      EXPECT_EQ(std::vector<int64_t>(got.data_ptr<int64_t>(), got.data_ptr<int64_t>() + n), labels);
    }
  }
}

// ---- calibration ---------------------------------------------------------------------------------------------

// The merge heights SciPy found for the documents of fixture_documents(17), in cosine distance.
std::vector<double> scipy_heights() {
  std::vector<double> heights;
  for (const json& c : fixtures()["cases"])
    if (c["n"].get<int64_t>() >= 17)
      for (const json& row : c["cosine"]["Z"]) heights.push_back(row[2].get<double>());
  std::sort(heights.begin(), heights.end());
  return heights;
}

TEST(WardCalibration, MonotoneInTheTargetAndWithinOneTieGroupOfIt) {
  const auto docs = fixture_documents(17);
  const auto heights = scipy_heights();
  int64_t unpooled = 0;
  for (const auto& doc : docs) unpooled += doc.rows();
  const double count = double(docs.size());
  double previous_tau = std::numeric_limits<double>::infinity();
  for (double target : {1.0, 2.0, 3.5, 5.0, 8.0, 13.0, 21.0, 34.0, 55.0, 89.0, 100.0, 140.0}) {
    SCOPED_TRACE(target);
    const spread::WardCalibration cal = spread::calibrate_ward_threshold(docs, target);
    EXPECT_LE(cal.threshold, previous_tau);
    previous_tau = cal.threshold;
    const auto below = std::lower_bound(heights.begin(), heights.end(), cal.threshold) - heights.begin();
    const auto upto = std::upper_bound(heights.begin(), heights.end(), cal.threshold) - heights.begin();
    // The merges that reach the target's total count, as far as merges can go.
    const int64_t needed = std::clamp<int64_t>(unpooled - std::llround(target * count), 0, int64_t(heights.size()));
    EXPECT_LT(below, needed) << "tau could be lower";
    EXPECT_GE(upto, needed) << "tau is too low";
    EXPECT_DOUBLE_EQ(cal.achieved_mean, double(unpooled - upto) / count);
    EXPECT_DOUBLE_EQ(cal.unpooled_mean, double(unpooled) / count);
    // The threshold pools every document to the achieved mean.
    double total = 0;
    for (const auto& out : spread::ward_pool_many(docs, WardBudget::distance_threshold(cal.threshold)))
      total += double(out.vectors.rows());
    EXPECT_DOUBLE_EQ(total / count, cal.achieved_mean);
  }
}

TEST(WardCalibration, ATargetAboveTheUnpooledMeanOnlyMergesDuplicates) {
  const auto docs = fixture_documents(17);
  const auto heights = scipy_heights();
  const auto cal = spread::calibrate_ward_threshold(docs, 1000);
  EXPECT_EQ(cal.threshold, 0.0);
  const auto zeros = std::upper_bound(heights.begin(), heights.end(), 0.0) - heights.begin();
  EXPECT_GT(zeros, 0);
  EXPECT_DOUBLE_EQ(cal.achieved_mean, cal.unpooled_mean - double(zeros) / double(docs.size()));
  EXPECT_THROW(spread::calibrate_ward_threshold(docs, 0.5), std::invalid_argument);
  EXPECT_THROW(spread::calibrate_ward_threshold({}, 4), std::invalid_argument);
}

}  // namespace
