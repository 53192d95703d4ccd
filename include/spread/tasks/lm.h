#pragma once
// Language-model pretraining as a task: random windows of the tokenised corpus, next-token cross-entropy plus the
// optional dispersion term (losses/weighted_loss.h), validation loss / perplexity / bits per byte on fixed windows of
// the val split, and geometry diagnostics on fixed single documents of the val split (windows when the corpus has
// no document boundaries).
#include <memory>
#include <vector>

#include "spread/data/loader.h"
#include "spread/eval/multiple_choice.h"
#include "spread/losses/weighted_loss.h"
#include "spread/run/setup.h"
#include "spread/tasks/task.h"

namespace spread {

// The LM probe's texts: up to diagnostics.probe_texts single documents of the val split (load_documents: lines,
// blank-line paragraphs, JSONL records or WordNet synsets), seeded, tokenised and truncated to block_size; a document
// that straddles the byte cut of the train/val split is passed over. Condensation is a property of the tokens of
// one text (docs/design.md §3.5), which windows across unrelated documents do not show. Empty when the corpus has no
// document boundaries.
std::vector<std::vector<int32_t>> probe_documents(const Recipe& recipe, const Tokenizer& tokenizer);

class LanguageModelTask : public TrainingTask {
 public:
  LanguageModelTask(const Recipe& recipe, const std::string& run_dir, torch::Device device, const Note& note,
                    const DataShard& shard = {});

  const Tokenizer& tokenizer() const override { return *data_.tokenizer; }
  MicroStepLoss micro_step(Transformer& model, int64_t step, int64_t micro, int64_t micro_steps) override;
  Evaluation evaluate(Transformer& model) override;
  nlohmann::json probe(Transformer& model) override;
  WorkPerStep work_per_step() const override;

 private:
  void prepare_probe(const Note& note);
  void read_choice_files(const Note& note);

  Recipe recipe_;
  DataShard shard_;
  torch::Device device_;
  RunData data_;
  WeightedLoss loss_;
  std::unique_ptr<WindowSampler> sampler_;
  std::vector<Batch> eval_batches_;
  std::vector<std::pair<std::string, std::vector<ChoiceItem>>> choices_;  // eval.choices: (metric prefix, items)
  std::vector<std::vector<int32_t>> probe_docs_;  // token ids, truncated to block_size
  Batch probe_batch_;                               // the fallback: windows of the val split
  double val_bytes_per_token_ = 1.0;
};

}  // namespace spread
