#include "spread/eval/hard_negatives.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "spread/data/pairs.h"
#include "spread/util/error.h"

namespace spread {
namespace {

constexpr int64_t kQueriesPerBlock = 256;  // a [256, D] score block: 5 MB for SciFact's 5,183 documents
constexpr float kDisqualified = -std::numeric_limits<float>::infinity();

bool may_disqualify(const HardNegativeOptions& o) {
  return o.absolute_margin || o.relative_margin || o.max_score;
}

// Step 2 of the header, on one query's candidates (scores in place).
void disqualify(float* score, const int64_t* index, int64_t k, const std::vector<int64_t>& positives,
                float hardest_positive, const HardNegativeOptions& o) {
  for (int64_t j = 0; j < k; ++j) {
    float& s = score[j];
    if (std::find(positives.begin(), positives.end(), index[j]) != positives.end()) s = kDisqualified;
    if (o.absolute_margin && s + float(*o.absolute_margin) > hardest_positive) s = kDisqualified;
    if (o.relative_margin && s > hardest_positive * float(1 - *o.relative_margin)) s = kDisqualified;
    if (o.max_score && s > float(*o.max_score)) s = kDisqualified;
    if (o.min_score && s < float(*o.min_score)) s = kDisqualified;
  }
}

// Steps 3-5 for one query: `order` holds the candidates' positions sorted by score, highest first.
MinedNegatives pick(const float* score, const int64_t* index, std::vector<int64_t> order, int64_t range_max,
                    int64_t query, const HardNegativeOptions& o) {
  order.resize(size_t(std::min<int64_t>(int64_t(order.size()), range_max)));
  order.erase(order.begin(), order.begin() + std::min<int64_t>(o.range_min, int64_t(order.size())));
  if (o.sampling == "random") {
    int64_t qualified = 0;
    for (int64_t p : order) qualified += score[p] != kDisqualified;
    const int64_t options = std::min<int64_t>(std::max(qualified, o.num_negatives), int64_t(order.size()));
    const std::vector<int64_t> drawn = seeded_permutation(options, o.seed, uint64_t(query));
    std::vector<int64_t> sampled;
    for (int64_t i = 0; i < std::min<int64_t>(o.num_negatives, options); ++i) sampled.push_back(order[size_t(drawn[i])]);
    std::stable_sort(sampled.begin(), sampled.end(), [&](int64_t a, int64_t b) { return score[a] > score[b]; });
    order = std::move(sampled);
  }
  MinedNegatives out;
  if (int64_t(order.size()) < o.num_negatives) return out;
  for (int64_t i = 0; i < o.num_negatives; ++i)
    if (score[order[size_t(i)]] == kDisqualified) return out;
  for (int64_t i = 0; i < o.num_negatives; ++i) {
    out.corpus_index.push_back(index[order[size_t(i)]]);
    out.score.push_back(score[order[size_t(i)]]);
  }
  return out;
}

float hardest_positive_score(const torch::Tensor& query, const torch::Tensor& corpus,
                             const std::vector<int64_t>& positives) {
  float lowest = std::numeric_limits<float>::infinity();
  for (int64_t p : positives) lowest = std::min(lowest, torch::dot(query, corpus[p]).item<float>());
  return lowest;
}

}  // namespace

void check_hard_negative_options(const HardNegativeOptions& o, int64_t max_positives, int64_t documents) {
  const int64_t range_max = o.range_max ? *o.range_max : default_range_max(o, max_positives);
  if (o.num_negatives < 1) throw UserError(fmt::format("--num-negatives {}: give at least 1", o.num_negatives));
  if (o.range_min < 0) throw UserError(fmt::format("--range-min {}: give 0 or more", o.range_min));
  if (o.range_max && *o.range_max <= o.range_min)
    throw UserError(fmt::format("--range-max {} must exceed --range-min {}", *o.range_max, o.range_min));
  if (o.sampling != "top" && o.sampling != "random")
    throw UserError("--sampling '" + o.sampling + "': use top or random");
  if (range_max + max_positives <= documents) return;
  if (o.range_max)
    throw UserError(fmt::format("--range-max {} with up to {} positives a query needs the top {} of a corpus of {} "
                                "documents; the largest --range-max that fits is {}",
                                range_max, max_positives, range_max + max_positives, documents,
                                documents - max_positives));
  const int64_t per_negative = may_disqualify(o) ? 10 : 1;
  const int64_t largest = (documents - 2 * max_positives - o.range_min) / per_negative;
  throw UserError(fmt::format("--num-negatives {} needs the top {} of a corpus of {} documents (range_max {} + {} "
                              "positives); the largest that fits is {}",
                              o.num_negatives, range_max + max_positives, documents, range_max, max_positives,
                              largest < 1 ? std::string("none: the corpus is too small") : std::to_string(largest)));
}

int64_t default_range_max(const HardNegativeOptions& o, int64_t max_positives) {
  return o.range_min + o.num_negatives * (may_disqualify(o) ? 10 : 1) + max_positives;
}

std::vector<MinedNegatives> mine_hard_negatives(const torch::Tensor& queries, const torch::Tensor& corpus,
                                                const std::vector<std::vector<int64_t>>& positives,
                                                const HardNegativeOptions& options,
                                                const std::function<void(int64_t, int64_t)>& progress) {
  torch::NoGradGuard no_grad;
  const int64_t n_queries = queries.size(0), documents = corpus.size(0);
  int64_t max_positives = 1;
  for (const auto& p : positives) max_positives = std::max<int64_t>(max_positives, int64_t(p.size()));
  const int64_t range_max = options.range_max ? *options.range_max : default_range_max(options, max_positives);
  check_hard_negative_options(options, max_positives, documents);
  const int64_t k = range_max + max_positives;
  std::vector<MinedNegatives> out;
  out.reserve(size_t(n_queries));
  const torch::Tensor corpus_t = corpus.t().contiguous();
  for (int64_t start = 0; start < n_queries; start += kQueriesPerBlock) {
    const int64_t end = std::min(n_queries, start + kQueriesPerBlock);
    auto [scores, indices] = torch::topk(torch::mm(queries.slice(0, start, end), corpus_t), k, /*dim=*/1);
    scores = scores.contiguous();
    indices = indices.contiguous();
    for (int64_t q = start; q < end; ++q) {
      float* score = scores[q - start].data_ptr<float>();
      const int64_t* index = indices[q - start].data_ptr<int64_t>();
      disqualify(score, index, k, positives[size_t(q)], hardest_positive_score(queries[q], corpus, positives[size_t(q)]),
                 options);
      std::vector<int64_t> order(static_cast<size_t>(k));
      for (int64_t j = 0; j < k; ++j) order[size_t(j)] = j;
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return score[a] > score[b]; });
      out.push_back(pick(score, index, std::move(order), range_max, q, options));
    }
    if (progress) progress(end, n_queries);
  }
  return out;
}

}  // namespace spread
