#pragma once
// Late-interaction retrieval (docs/design.md §6, §8.3): every query of a BEIR set against the whole corpus by MaxSim,
// the documents encoded once (encode/multi_vector.h) and Ward-pooled (pooling/ward.h) at each pool factor. Shared by
// the maxsim training task's validation, `spread eval` and `spread calibrate`.
#include <functional>
#include <vector>

#include "spread/data/beir.h"
#include "spread/encode/multi_vector.h"
#include "spread/eval/retrieval_metrics.h"
#include "spread/pooling/ward.h"

namespace spread {

// Retrieval at one pool factor: the metrics, and the mean number of vectors per document scored.
struct PooledRetrieval {
  double pool_factor = 1;
  RetrievalMetrics metrics;
  double mean_vectors = 0;
};

// Encodes the corpus and the queries once, then for each pool factor (1 = unpooled) pools every document
// (WardBudget::pool_factor, `ward` options) and ranks the whole corpus by MaxSim (ties by corpus id).
std::vector<PooledRetrieval> evaluate_multi_vector_retrieval(
    Transformer& model, const Tokenizer& tokenizer, const BeirData& data, const MultiVectorSpec& spec,
    const std::vector<double>& pool_factors, const WardPoolOptions& ward = {},
    const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace spread
