#pragma once
// Language-model pretraining as a task: random windows of the tokenised corpus, next-token cross-entropy plus the
// optional dispersion term (losses/objective.h), validation loss / perplexity / bits per byte on fixed windows of
// the val split, and geometry diagnostics on a fixed probe batch.
#include <memory>
#include <vector>

#include "spread/data/loader.h"
#include "spread/losses/objective.h"
#include "spread/tasks/task.h"
#include "spread/train/setup.h"

namespace spread {

class LanguageModelTask : public TrainingTask {
 public:
  LanguageModelTask(const Recipe& recipe, const std::string& run_dir, torch::Device device, const Note& note);

  const Tokenizer& tokenizer() const override { return *data_.tokenizer; }
  MicroStepLoss micro_step(Transformer& model, int64_t step, int64_t micro, int64_t micro_steps) override;
  Evaluation evaluate(Transformer& model) override;
  nlohmann::json probe(Transformer& model) override;
  WorkPerStep work_per_step() const override;

 private:
  Recipe recipe_;
  torch::Device device_;
  RunData data_;
  Objective objective_;
  std::unique_ptr<WindowSampler> sampler_;
  std::vector<Batch> eval_batches_;
  Batch probe_batch_;
  double val_bytes_per_token_ = 1.0;
};

}  // namespace spread
