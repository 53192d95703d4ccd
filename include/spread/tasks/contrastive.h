#pragma once
// Contrastive fine-tuning of text embeddings (docs/design.md §5) as a task: batches of pair examples without a
// repeated text (data/pairs.h), anchors and candidates (positives, then each hard-negative column) embedded by
// pooling the final hidden states, in-batch InfoNCE (losses/contrastive.h); validation InfoNCE on fixed val
// batches; [eval] sts / beir; the probe: geometry of fixed val anchors, and alignment / uniformity of their pairs.
//
// Gradient accumulation and negatives (sentence-transformers #2916): each micro-step is its own contrastive batch,
// so train.grad_accum = 4 with batch_size = 32 sees 31 in-batch negatives per anchor, not 127. For more negatives
// at the memory of a small batch use loss.contrastive.mini_batch (GradCache) with a large batch_size instead.
#include <memory>
#include <vector>

#include "spread/losses/contrastive.h"
#include "spread/tasks/encoder.h"

namespace spread {

// One contrastive batch as token sequences: anchors, then candidates [p_1..p_B, n^1_1..n^1_B, ...]; text ids are
// equal exactly when the texts are (for duplicate masking; undefined tensors = no masking). With a gather the
// sequences are this rank's and the text ids those of the global batch.
struct ContrastiveBatch {
  std::vector<const std::vector<int32_t>*> anchors, candidates;
  torch::Tensor anchor_text_ids, candidate_text_ids;
};

struct ContrastiveStepOptions {
  ContrastiveOptions loss;
  Pooling pooling = Pooling::Mean;
  int32_t pad_id = 0;
  int64_t mini_batch = 0;  // > 0: cached mode (GradCache) with chunks of this many texts
  double grad_scale = 1.0; // the loss is backpropagated times this (1 / micro-steps)
  // loss.contrastive.gather: InfoNCE over the global batch of all ranks (the batch's text ids are the global
  // batch's); null = this rank's batch only
  const DataShard* gather = nullptr;
  torch::Device device{torch::kCPU};
};

// Embeds the batch, computes InfoNCE and backpropagates it (times grad_scale) into the model; returns the loss.
// Uncached: anchors in one forward pass, candidates in another, one graph. Cached (mini_batch = m, Gao et al.
// 2021, GradCache): (1) embed chunks of m texts under no_grad, saving LibTorch's CPU generator state before each;
// (2) InfoNCE on the detached embeddings and its gradient per embedding; (3) per chunk, restore its generator state
// (the same dropout masks), embed again with a graph and backpropagate <embedding, cached gradient>. The gradient
// equals that of one graph over the same chunks, at the memory of one chunk's graph.
double contrastive_backward(Transformer& model, const ContrastiveBatch& batch, const ContrastiveStepOptions& opt);

// The validation batches (indices into `val`): drawn as training batches are (data/pairs.h's PairBatchSampler: no
// text twice in a batch, topics mixed) from one fixed seed for every run, so every evaluation and every run on the
// same data scores the same batches; as many as fill the set once (at least one), at most max_batches; none
// with fewer than two examples (one example has no negative). In file order, as before, they were topically
// uniform, and validation InfoNCE meant something else than training's.
std::vector<std::vector<int64_t>> validation_batches(const std::vector<PairExample>& val, int64_t batch_size,
                                                     int64_t max_batches);

class ContrastiveTask : public TrainingTask {
 public:
  ContrastiveTask(const Recipe& recipe, const std::string& run_dir, torch::Device device, const Note& note,
                  const DataShard& shard = {});

  const Tokenizer& tokenizer() const override { return *tokenizer_; }
  MicroStepLoss micro_step(Transformer& model, int64_t step, int64_t micro, int64_t micro_steps) override;
  Evaluation evaluate(Transformer& model) override;
  nlohmann::json probe(Transformer& model) override;
  WorkPerStep work_per_step() const override;
  bool one_backward_per_micro_step() const override { return recipe_.loss.contrastive.mini_batch == 0; }

 private:
  struct Example {
    int32_t anchor, positive;
    std::vector<int32_t> negatives;  // indices into texts_
  };
  std::vector<Example> index_examples(const std::vector<PairExample>& examples);
  // The batch of examples `picked`; its text ids are those of examples `ids_of` (the global batch, for a gather).
  ContrastiveBatch make_batch(const std::vector<Example>& set, const std::vector<int64_t>& picked,
                              const std::vector<int64_t>& ids_of) const;
  ContrastiveBatch make_batch(const std::vector<Example>& set, const std::vector<int64_t>& picked) const {
    return make_batch(set, picked, picked);
  }

  Recipe recipe_;
  DataShard shard_;
  torch::Device device_;
  std::shared_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<TextTable> texts_;  // tokenised distinct texts
  std::vector<Example> train_, val_;
  std::unique_ptr<PairBatchSampler> sampler_;
  std::vector<std::vector<int64_t>> val_batches_;
  ContrastiveStepOptions step_options_;
  EncoderEvaluations evaluations_;
};

}  // namespace spread
