#pragma once
// Retrieval metrics (docs/design.md §8.3), binary relevance: a document is relevant when its id is in the query's
// set, and counts once however often it is listed there. With ranks r = 1, 2, ... of one query's ranking:
//   nDCG@k   = DCG@k / IDCG@k,  DCG@k = sum_{r <= k} rel_r / log2(r + 1),  IDCG@k = sum_{r <= min(|R|,k)} 1/log2(r+1)
//   MRR@k    = 1 / (rank of the first relevant document) when it is within k, else 0
//   Recall@k = |relevant documents within k| / |R|
// All three are 0 when R is empty; relevant documents missing from the ranking count as not retrieved; a ranking
// shorter than k is read as it is; a document listed twice counts at its first position only.
// Ties between equal scores are broken by corpus id, ascending std::string order, so a ranking and hence every
// metric is a function of the scores and the ids alone, whatever order the corpus was stored in.
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace spread {

// Indices of the min(top_k, n) best documents for one query: descending score, equal scores in ascending corpus id
// order (then ascending index, for duplicate ids). NaN scores rank below every number. One pass with a heap of
// top_k entries, O(n log top_k) time and O(top_k) memory. Throws std::invalid_argument when corpus_ids.size() != n
// or top_k < 0.
std::vector<int64_t> rank_documents(const float* scores, int64_t n, const std::vector<std::string>& corpus_ids,
                                    int64_t top_k);

// The metrics of one ranking (ids, best first) against the set of relevant ids; k >= 1, else std::invalid_argument.
double ndcg_at_k(const std::vector<std::string>& ranked_ids, const std::set<std::string>& relevant, int64_t k);
double mrr_at_k(const std::vector<std::string>& ranked_ids, const std::set<std::string>& relevant, int64_t k);
double recall_at_k(const std::vector<std::string>& ranked_ids, const std::set<std::string>& relevant, int64_t k);

// One query's metrics, named by its id.
struct QueryMetrics {
  std::string query_id;
  double ndcg_at_10 = 0, mrr_at_10 = 0, recall_at_100 = 0;
};

// Means over queries; NaN while no query has been added. per_query holds every counted query in the order added, for
// per-query analyses (a paired bootstrap over queries needs each query's value, not the mean).
struct RetrievalMetrics {
  double ndcg_at_10 = 0, mrr_at_10 = 0, recall_at_100 = 0;
  int64_t queries = 0;
  std::vector<QueryMetrics> per_query;
};

// Accumulates per-query nDCG@10, MRR@10 and Recall@100 (so each ranking should hold the top 100) and averages them
// with equal weight per query. A query without relevant documents is not counted (BEIR's qrels hold none such;
// callers skip them, and add() ignores one passed by mistake rather than pulling the means down).
class RetrievalAccumulator {
 public:
  void add(const std::string& query_id, const std::vector<std::string>& ranked_ids,
           const std::set<std::string>& relevant);
  RetrievalMetrics result() const;

 private:
  std::vector<QueryMetrics> per_query_;
};

}  // namespace spread
