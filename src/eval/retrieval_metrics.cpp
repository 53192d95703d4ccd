// Ranking and nDCG / MRR / Recall at k with binary relevance; the definitions and the tie rule are in
// retrieval_metrics.h.
#include "spread/eval/retrieval_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace spread {
namespace {

// The ranking order: true when document a ranks before document b. A strict total order on indices (NaN scores
// last, then ids, then indices), so the heap below and any full sort agree on every input.
struct RanksBefore {
  const float* scores;
  const std::vector<std::string>* ids;

  bool operator()(int64_t a, int64_t b) const {
    const float sa = scores[a], sb = scores[b];
    const bool nan_a = std::isnan(sa), nan_b = std::isnan(sb);
    if (nan_a != nan_b) return nan_b;
    if (!nan_a && sa != sb) return sa > sb;
    const int by_id = (*ids)[a].compare((*ids)[b]);
    if (by_id != 0) return by_id < 0;
    return a < b;
  }
};

void check_k(int64_t k) {
  if (k < 1) throw std::invalid_argument("retrieval metric: k must be at least 1, got " + std::to_string(k));
}

// 1-based ranks within the first k entries that hold a relevant document, each document at its first position only.
std::vector<int64_t> relevant_ranks(const std::vector<std::string>& ranked_ids, const std::set<std::string>& relevant,
                                    int64_t k) {
  check_k(k);
  const int64_t depth = std::min<int64_t>(k, static_cast<int64_t>(ranked_ids.size()));
  std::vector<int64_t> ranks;
  std::set<std::string> found;
  for (int64_t r = 1; r <= depth; ++r) {
    const std::string& id = ranked_ids[r - 1];
    if (relevant.count(id) != 0 && found.insert(id).second) ranks.push_back(r);
  }
  return ranks;
}

double discount(int64_t rank) { return 1.0 / std::log2(static_cast<double>(rank) + 1.0); }

}  // namespace

std::vector<int64_t> rank_documents(const float* scores, int64_t n, const std::vector<std::string>& corpus_ids,
                                    int64_t top_k) {
  if (n < 0 || static_cast<int64_t>(corpus_ids.size()) != n) {
    throw std::invalid_argument("rank_documents: " + std::to_string(n) + " scores but " +
                                std::to_string(corpus_ids.size()) + " corpus ids");
  }
  if (top_k < 0) throw std::invalid_argument("rank_documents: top_k must be >= 0, got " + std::to_string(top_k));
  const size_t keep = static_cast<size_t>(std::min(top_k, n));
  const RanksBefore before{scores, &corpus_ids};
  // A heap ordered by `before` keeps the worst of the documents kept so far at its front, the one to evict.
  std::vector<int64_t> heap;
  heap.reserve(keep);
  for (int64_t i = 0; i < n && keep > 0; ++i) {
    if (heap.size() < keep) {
      heap.push_back(i);
      std::push_heap(heap.begin(), heap.end(), before);
    } else if (before(i, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), before);
      heap.back() = i;
      std::push_heap(heap.begin(), heap.end(), before);
    }
  }
  std::sort_heap(heap.begin(), heap.end(), before);  // ascending under `before`: best first
  return heap;
}

double ndcg_at_k(const std::vector<std::string>& ranked_ids, const std::set<std::string>& relevant, int64_t k) {
  const std::vector<int64_t> ranks = relevant_ranks(ranked_ids, relevant, k);
  if (relevant.empty()) return 0.0;
  double dcg = 0.0, idcg = 0.0;
  for (int64_t r : ranks) dcg += discount(r);
  const int64_t ideal = std::min<int64_t>(k, static_cast<int64_t>(relevant.size()));
  for (int64_t r = 1; r <= ideal; ++r) idcg += discount(r);
  return dcg / idcg;
}

double mrr_at_k(const std::vector<std::string>& ranked_ids, const std::set<std::string>& relevant, int64_t k) {
  const std::vector<int64_t> ranks = relevant_ranks(ranked_ids, relevant, k);
  return ranks.empty() ? 0.0 : 1.0 / static_cast<double>(ranks.front());
}

double recall_at_k(const std::vector<std::string>& ranked_ids, const std::set<std::string>& relevant, int64_t k) {
  const std::vector<int64_t> ranks = relevant_ranks(ranked_ids, relevant, k);
  if (relevant.empty()) return 0.0;
  return static_cast<double>(ranks.size()) / static_cast<double>(relevant.size());
}

void RetrievalAccumulator::add(const std::string& query_id, const std::vector<std::string>& ranked_ids,
                               const std::set<std::string>& relevant) {
  if (relevant.empty()) return;
  per_query_.push_back({query_id, ndcg_at_k(ranked_ids, relevant, 10), mrr_at_k(ranked_ids, relevant, 10),
                        recall_at_k(ranked_ids, relevant, 100)});
}

RetrievalMetrics RetrievalAccumulator::result() const {
  RetrievalMetrics m;
  m.queries = static_cast<int64_t>(per_query_.size());
  m.per_query = per_query_;
  double ndcg = 0, mrr = 0, recall = 0;
  for (const QueryMetrics& q : per_query_) {
    ndcg += q.ndcg_at_10;
    mrr += q.mrr_at_10;
    recall += q.recall_at_100;
  }
  const double n = m.queries > 0 ? static_cast<double>(m.queries) : std::numeric_limits<double>::quiet_NaN();
  m.ndcg_at_10 = ndcg / n;
  m.mrr_at_10 = mrr / n;
  m.recall_at_100 = recall / n;
  return m;
}

}  // namespace spread
