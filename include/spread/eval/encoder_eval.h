#pragma once
// Evaluation of text-embedding models (docs/design.md §8.2, §8.3): STS (Spearman of the cosine of the two texts'
// embeddings against the gold score) and retrieval in BEIR layout (exact search over the whole encoded corpus by
// cosine, ties by corpus id; nDCG@10, MRR@10, Recall@100 averaged over the queries that have a relevant document).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>
#include <torch/types.h>

#include "spread/data/beir.h"
#include "spread/data/pairs.h"
#include "spread/data/tokenizer.h"
#include "spread/eval/retrieval_metrics.h"
#include "spread/model/transformer.h"
#include "spread/pooling/pooling.h"

namespace spread {

struct EncoderSpec {
  int64_t max_length = 128;  // tokens per text, [CLS] and [SEP] included
  Pooling pooling = Pooling::Mean;
  int64_t batch_size = 64;
  torch::Device device{torch::kCPU};
};

struct StsScore {
  double spearman = 0;
  int64_t pairs = 0;
};

StsScore evaluate_sts(Transformer& model, const Tokenizer& tokenizer, const std::vector<StsPair>& pairs,
                      const EncoderSpec& spec);

// `progress(done, total)` counts encoded texts (corpus, then queries).
RetrievalMetrics evaluate_retrieval(Transformer& model, const Tokenizer& tokenizer, const BeirData& data,
                                    const EncoderSpec& spec,
                                    const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace spread
