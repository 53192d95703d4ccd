// Retrieval metrics (docs/design.md §8.3) against values worked by hand, written as the formulas they come from, and
// rank_documents against a full sort of (-score, id, index) tuples on tie-heavy random scores.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "spread/eval/retrieval_metrics.h"

namespace {

using spread::mrr_at_k;
using spread::ndcg_at_k;
using spread::rank_documents;
using spread::recall_at_k;
using Ids = std::vector<std::string>;

Ids ids_of(const std::vector<int64_t>& order, const Ids& corpus) {
  Ids out;
  for (int64_t i : order) out.push_back(corpus[i]);
  return out;
}

Ids ranked_ids(const std::vector<float>& scores, const Ids& corpus, int64_t top_k) {
  return ids_of(rank_documents(scores.data(), int64_t(scores.size()), corpus, top_k), corpus);
}

}  // namespace

TEST(RetrievalMetrics, NdcgBreaksTiesByCorpusId) {
  // d2 and d3 tie at 0.5; id order puts d2 at rank 2 and the relevant d3 at rank 3 (rank 2 if the tie went the
  // other way, which would give nDCG 1).
  const Ids corpus = {"d3", "d1", "d2", "d0"};
  const Ids ranked = ranked_ids({0.5f, 0.9f, 0.5f, 0.1f}, corpus, 4);
  ASSERT_EQ(ranked, (Ids{"d1", "d2", "d3", "d0"}));
  const std::set<std::string> relevant = {"d1", "d3"};
  const double expected = (1 / std::log2(2.0) + 1 / std::log2(4.0)) / (1 / std::log2(2.0) + 1 / std::log2(3.0));
  EXPECT_NEAR(ndcg_at_k(ranked, relevant, 10), expected, 1e-15);
}

TEST(RetrievalMetrics, MrrBreaksTiesByCorpusId) {
  const Ids corpus = {"b", "a", "c"};
  const Ids ranked = ranked_ids({0.7f, 0.7f, 0.7f}, corpus, 3);  // all tied: a, b, c
  EXPECT_DOUBLE_EQ(mrr_at_k(ranked, {"b"}, 10), 1.0 / 2);
  EXPECT_DOUBLE_EQ(mrr_at_k(ranked, {"c", "b"}, 10), 1.0 / 2);
  EXPECT_DOUBLE_EQ(mrr_at_k(ranked, {"c"}, 2), 0.0);  // first relevant beyond k
}

TEST(RetrievalMetrics, RelevantDocumentsMissingFromTheRanking) {
  const Ids ranked = {"a", "b", "c"};
  const std::set<std::string> relevant = {"b", "x", "y"};  // x and y never retrieved
  const double idcg = 1 / std::log2(2.0) + 1 / std::log2(3.0) + 1 / std::log2(4.0);
  EXPECT_NEAR(ndcg_at_k(ranked, relevant, 10), (1 / std::log2(3.0)) / idcg, 1e-15);
  EXPECT_DOUBLE_EQ(mrr_at_k(ranked, relevant, 10), 1.0 / 2);
  EXPECT_DOUBLE_EQ(recall_at_k(ranked, relevant, 10), 1.0 / 3);
}

TEST(RetrievalMetrics, KLargerThanTheRanking) {
  const Ids ranked = {"a", "b"};
  EXPECT_NEAR(ndcg_at_k(ranked, {"b"}, 10), (1 / std::log2(3.0)) / (1 / std::log2(2.0)), 1e-15);
  EXPECT_DOUBLE_EQ(mrr_at_k(ranked, {"b"}, 10), 1.0 / 2);
  EXPECT_DOUBLE_EQ(recall_at_k(ranked, {"b"}, 10), 1.0);
  EXPECT_DOUBLE_EQ(recall_at_k({}, {"b"}, 10), 0.0);  // nothing retrieved at all
}

TEST(RetrievalMetrics, KCutsTheRanking) {
  const Ids ranked = {"a", "b", "c", "d"};
  const std::set<std::string> relevant = {"c", "d"};
  EXPECT_DOUBLE_EQ(ndcg_at_k(ranked, relevant, 2), 0.0);
  EXPECT_DOUBLE_EQ(mrr_at_k(ranked, relevant, 2), 0.0);
  EXPECT_DOUBLE_EQ(recall_at_k(ranked, relevant, 2), 0.0);
  EXPECT_NEAR(ndcg_at_k(ranked, relevant, 3), (1 / std::log2(4.0)) / (1 / std::log2(2.0) + 1 / std::log2(3.0)),
              1e-15);
  EXPECT_DOUBLE_EQ(mrr_at_k(ranked, relevant, 3), 1.0 / 3);
  EXPECT_DOUBLE_EQ(recall_at_k(ranked, relevant, 3), 1.0 / 2);
  EXPECT_DOUBLE_EQ(recall_at_k(ranked, relevant, 4), 1.0);
}

TEST(RetrievalMetrics, IdealDcgCountsAtMostKRelevantDocuments) {
  const std::set<std::string> relevant = {"r1", "r2", "r3", "r4", "r5"};
  EXPECT_DOUBLE_EQ(ndcg_at_k({"r4", "r2", "x"}, relevant, 2), 1.0);  // IDCG over min(5, 2) = 2 ranks
  const double idcg3 = 1 / std::log2(2.0) + 1 / std::log2(3.0) + 1 / std::log2(4.0);
  EXPECT_NEAR(ndcg_at_k({"r1", "x", "r5"}, relevant, 3), (1 / std::log2(2.0) + 1 / std::log2(4.0)) / idcg3, 1e-15);
  EXPECT_DOUBLE_EQ(recall_at_k({"r1", "x", "r5"}, relevant, 3), 2.0 / 5);
}

TEST(RetrievalMetrics, NoRelevantDocumentsGiveZero) {
  const Ids ranked = {"a", "b"};
  EXPECT_EQ(ndcg_at_k(ranked, {}, 10), 0.0);
  EXPECT_EQ(mrr_at_k(ranked, {}, 10), 0.0);
  EXPECT_EQ(recall_at_k(ranked, {}, 10), 0.0);
}

TEST(RetrievalMetrics, DocumentListedTwiceCountsOnce) {
  const Ids ranked = {"a", "a", "b"};
  EXPECT_DOUBLE_EQ(ndcg_at_k(ranked, {"a"}, 10), 1.0);
  EXPECT_DOUBLE_EQ(recall_at_k(ranked, {"a"}, 10), 1.0);
  EXPECT_NEAR(ndcg_at_k(ranked, {"a", "b"}, 10), (1 / std::log2(2.0) + 1 / std::log2(4.0)) /
                                                     (1 / std::log2(2.0) + 1 / std::log2(3.0)), 1e-15);
}

TEST(RetrievalMetrics, KBelowOneThrows) {
  EXPECT_THROW(ndcg_at_k({"a"}, {"a"}, 0), std::invalid_argument);
  EXPECT_THROW(mrr_at_k({"a"}, {"a"}, -1), std::invalid_argument);
  EXPECT_THROW(recall_at_k({"a"}, {"a"}, 0), std::invalid_argument);
}

TEST(RetrievalMetrics, AccumulatorAveragesQueriesWithRelevantDocuments) {
  spread::RetrievalAccumulator acc;
  acc.add("q1", {"r", "n0", "n1"}, {"r"});  // nDCG 1, MRR 1, Recall 1
  Ids long_ranking;
  for (int i = 1; i <= 150; ++i) long_ranking.push_back("n" + std::to_string(i));
  long_ranking[3 - 1] = "ra";   // rank 3: inside @10
  long_ranking[50 - 1] = "rb";  // rank 50: inside @100 only
  long_ranking[120 - 1] = "rc";  // rank 120: beyond @100
  acc.add("q2", long_ranking, {"ra", "rb", "rc"});
  acc.add("q3", {"n0"}, {});  // no relevant documents: not counted
  const spread::RetrievalMetrics m = acc.result();
  EXPECT_EQ(m.queries, 2);
  const double ndcg2 = (1 / std::log2(4.0)) / (1 / std::log2(2.0) + 1 / std::log2(3.0) + 1 / std::log2(4.0));
  EXPECT_NEAR(m.ndcg_at_10, (1.0 + ndcg2) / 2, 1e-15);
  EXPECT_NEAR(m.mrr_at_10, (1.0 + 1.0 / 3) / 2, 1e-15);
  EXPECT_NEAR(m.recall_at_100, (1.0 + 2.0 / 3) / 2, 1e-15);
  // Each counted query's own values, under its id, in the order added; the uncounted one is not listed.
  ASSERT_EQ(m.per_query.size(), 2u);
  EXPECT_EQ(m.per_query[0].query_id, "q1");
  EXPECT_EQ(m.per_query[1].query_id, "q2");
  EXPECT_DOUBLE_EQ(m.per_query[0].ndcg_at_10, 1.0);
  EXPECT_NEAR(m.per_query[1].ndcg_at_10, ndcg2, 1e-15);
  EXPECT_NEAR(m.per_query[1].mrr_at_10, 1.0 / 3, 1e-15);
  EXPECT_NEAR(m.per_query[1].recall_at_100, 2.0 / 3, 1e-15);
}

TEST(RetrievalMetrics, EmptyAccumulatorGivesNaN) {
  const spread::RetrievalMetrics m = spread::RetrievalAccumulator().result();
  EXPECT_EQ(m.queries, 0);
  EXPECT_TRUE(std::isnan(m.ndcg_at_10));
  EXPECT_TRUE(std::isnan(m.mrr_at_10));
  EXPECT_TRUE(std::isnan(m.recall_at_100));
}

TEST(RankDocuments, TiesAndTopK) {
  const Ids corpus = {"c", "z", "a", "b", "y"};
  const std::vector<float> scores = {0.5f, 0.9f, 0.5f, 0.5f, 0.1f};
  const float* s = scores.data();
  EXPECT_EQ(rank_documents(s, 5, corpus, 3), (std::vector<int64_t>{1, 2, 3}));        // z, a, b
  EXPECT_EQ(rank_documents(s, 5, corpus, 5), (std::vector<int64_t>{1, 2, 3, 0, 4}));  // z, a, b, c, y
  EXPECT_EQ(rank_documents(s, 5, corpus, 9), (std::vector<int64_t>{1, 2, 3, 0, 4}));  // top_k > n: all
  EXPECT_EQ(rank_documents(s, 5, corpus, 1), (std::vector<int64_t>{1}));
  EXPECT_TRUE(rank_documents(s, 5, corpus, 0).empty());
  EXPECT_TRUE(rank_documents(nullptr, 0, {}, 10).empty());
}

TEST(RankDocuments, IdsCompareAsStringsNotNumbers) {
  const Ids corpus = {"doc9", "doc10", "doc100"};
  EXPECT_EQ(ranked_ids({1.0f, 1.0f, 1.0f}, corpus, 3), (Ids{"doc10", "doc100", "doc9"}));
}

TEST(RankDocuments, NaNScoresRankLast) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Ids corpus = {"a", "b", "c", "d"};
  EXPECT_EQ(ranked_ids({nan, -1.0f, nan, 2.0f}, corpus, 4), (Ids{"d", "b", "a", "c"}));
  EXPECT_EQ(ranked_ids({nan, -1.0f, nan, 2.0f}, corpus, 2), (Ids{"d", "b"}));
}

TEST(RankDocuments, BadArgumentsThrow) {
  const std::vector<float> scores = {1.0f, 2.0f};
  EXPECT_THROW(rank_documents(scores.data(), 2, {"a"}, 1), std::invalid_argument);
  EXPECT_THROW(rank_documents(scores.data(), 2, {"a", "b"}, -1), std::invalid_argument);
}

TEST(RankDocuments, EqualsFullSortOnTieHeavyScores) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    const int n = 1 + int(rng() % 300);
    std::vector<float> scores(n);
    Ids corpus(n);
    for (int i = 0; i < n; ++i) {
      scores[i] = float(int(rng() % 8)) * 0.125f - 0.5f;  // 8 levels: most scores tie
      corpus[i] = "doc" + std::to_string(rng() % 40);  // many duplicate ids: those go in index order
    }
    // Reference: sort every (-score, id, index) tuple lexicographically.
    std::vector<std::tuple<float, std::string, int64_t>> all;
    for (int i = 0; i < n; ++i) all.emplace_back(-scores[i], corpus[i], i);
    std::sort(all.begin(), all.end());
    for (int64_t k : {int64_t(1), int64_t(10), int64_t(n) / 2, int64_t(n)}) {
      std::vector<int64_t> expected;
      for (int64_t r = 0; r < std::min<int64_t>(k, n); ++r) expected.push_back(std::get<2>(all[r]));
      EXPECT_EQ(rank_documents(scores.data(), n, corpus, k), expected) << "n=" << n << " k=" << k;
    }
  }
}
