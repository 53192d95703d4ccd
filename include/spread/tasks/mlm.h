#pragma once
// Masked-language-model pretraining of an encoder (losses/mlm.h) as a task: batches of single documents
// ("[CLS] document [SEP]", truncated to data.max_length, right-padded with a padding mask), drawn uniformly by a
// seeded stream of (step, micro); validation loss on fixed val documents with fixed masks; [eval] sts / beir; the
// probe on fixed val documents.
#include <memory>
#include <vector>

#include "spread/tasks/encoder.h"

namespace spread {

class MaskedLanguageModelTask : public TrainingTask {
 public:
  MaskedLanguageModelTask(const Recipe& recipe, const std::string& run_dir, torch::Device device, const Note& note,
                          const DataShard& shard = {});

  const Tokenizer& tokenizer() const override { return *tokenizer_; }
  MicroStepLoss micro_step(Transformer& model, int64_t step, int64_t micro, int64_t micro_steps) override;
  Evaluation evaluate(Transformer& model) override;
  nlohmann::json probe(Transformer& model) override;
  WorkPerStep work_per_step() const override;

 private:
  // The masked-LM loss of documents `docs` with masks drawn from `seed`, and the number of chosen positions.
  std::pair<torch::Tensor, int64_t> batch_loss(Transformer& model, const std::vector<const std::vector<int32_t>*>& docs,
                                               uint64_t seed) const;

  Recipe recipe_;
  DataShard shard_;
  torch::Device device_;
  std::shared_ptr<Tokenizer> tokenizer_;
  std::vector<std::vector<int32_t>> train_, val_;
  EncoderEvaluations evaluations_;
};

}  // namespace spread
