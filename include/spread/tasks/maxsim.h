#pragma once
// Late-interaction (ColBERT-style) training as a task (docs/design.md §6): pair data as for contrastive training
// (queries = anchors, documents = positives and hard negatives), queries and documents encoded to unit token
// vectors by the model's multi-vector head (encode/multi_vector.h), MaxSim scores of every query against every
// document of the batch, cross-entropy towards each query's positive (losses/maxsim.h). With
// [loss.pooling_aware] enabled, the same documents are also Ward-pooled (assignment on a detached copy, gradient
// through pooling/ward_ste.h) and scored again, from the one encoder pass:
//   L = weight_full * L(q, D) + weight_pooled * L(q, pool(D)).
// Validation: the same loss on fixed val batches, and [eval] beir retrieval unpooled and at the pool factor.
// Probe: geometry of the final hidden states of fixed val documents.
#include <memory>
#include <optional>
#include <vector>

#include "spread/encode/multi_vector.h"
#include "spread/pooling/ward_ste.h"
#include "spread/tasks/encoder.h"

namespace spread {

struct MaxSimStepOptions {
  double temperature = 1.0;
  bool pooling_aware = false;
  double pool_factor = 4, weight_full = 1, weight_pooled = 1;
  WardSte ste = WardSte::kMean;
  WardPoolOptions ward;
  double grad_scale = 1.0;  // the loss is backpropagated times this (1 / micro-steps); 0 = no backward
  const DataShard* gather = nullptr;  // loss.maxsim.gather: score against the global batch of all ranks
};

// One batch: Q queries, and Q N documents in the layout of docs/design.md §6.2 (query i's positive at i N, then its
// negatives).
struct MaxSimBatch {
  TokenBatch queries, documents;
};

struct MaxSimLoss {
  torch::Tensor total, full, pooled;  // pooled undefined unless pooling-aware
};

// Encodes the batch once, computes the (pooling-aware) loss and backpropagates total * grad_scale when grad_scale
// is not 0.
MaxSimLoss maxsim_step(Transformer& model, const MaxSimBatch& batch, const MaxSimStepOptions& opt);

// The recipe's lengths and expansion; the skiplist: loss.maxsim.skiplist_words' ids when it lists any (PyLate's
// rule), else the punctuation rule.
MultiVectorSpec multi_vector_spec(const Recipe& recipe, const Tokenizer& tokenizer, const torch::Device& device);
MaxSimStepOptions maxsim_step_options(const Recipe& recipe);

class MaxSimTask : public TrainingTask {
 public:
  MaxSimTask(const Recipe& recipe, const std::string& run_dir, torch::Device device, const Note& note,
             const DataShard& shard = {});

  const Tokenizer& tokenizer() const override { return *tokenizer_; }
  MicroStepLoss micro_step(Transformer& model, int64_t step, int64_t micro, int64_t micro_steps) override;
  Evaluation evaluate(Transformer& model) override;
  nlohmann::json probe(Transformer& model) override;
  WorkPerStep work_per_step() const override;

 private:
  struct Example {
    int32_t query, positive;
    std::vector<int32_t> negatives;  // document ids
  };
  std::vector<Example> index_examples(const std::vector<PairExample>& examples);
  MaxSimBatch make_batch(const std::vector<Example>& set, const std::vector<int64_t>& picked) const;
  void add_retrieval(Transformer& model, Evaluation& e) const;

  Recipe recipe_;
  DataShard shard_;
  torch::Device device_;
  std::shared_ptr<Tokenizer> tokenizer_;
  MultiVectorSpec spec_;
  MaxSimStepOptions step_options_;
  std::unique_ptr<TextTable> queries_, documents_;
  std::vector<Example> train_, val_;
  std::unique_ptr<PairBatchSampler> sampler_;
  std::optional<BeirData> beir_;
};

}  // namespace spread
