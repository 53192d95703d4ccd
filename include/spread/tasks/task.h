#pragma once
// A training task is one objective's side of training: the data it reads and how the batch of a (step, micro-step)
// is drawn, the forward pass(es) and loss terms of a micro-step, its periodic evaluation and its diagnostics probe.
// The trainer (train/trainer.h) owns what every objective shares: the loop, optimizer and schedule, gradient
// accumulation and clipping, non-finite handling, checkpoints and resume, signals, the metrics log and progress.
// Adding an objective means a new task (and its loss files and recipe keys), not an edit of the loop.
//
// Promises every task keeps, so that resuming stays bitwise exact:
// - the batch of (step, micro) depends only on the recipe's seed and those two numbers (no sampler state);
// - the only random state a micro-step consumes is LibTorch's default generator (dropout), which the trainer
//   saves in checkpoints; evaluation and probes run in eval mode and consume none of it.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "spread/config/recipe.h"
#include "spread/data/tokenizer.h"
#include "spread/model/transformer.h"
#include "spread/config/objective.h"

namespace spread {

struct MicroStepLoss {
  double total = 0;                                   // the weighted loss of this micro-step (not divided)
  std::vector<std::pair<std::string, double>> parts;  // unweighted terms, logged as loss_<name>
};

struct Evaluation {
  nlohmann::json metrics;  // keys as written to metrics.jsonl (val_loss, ...)
  std::string summary;     // one console line
};

// What a step processes, for throughput: {"tok", batch * accum * block, "tokens_per_s"} for an LM.
struct WorkPerStep {
  std::string unit;     // the progress line's unit ("tok", "pairs", "texts")
  int64_t count = 0;    // units per optimizer step
  std::string log_key;  // metrics.jsonl key of the rate
};

// This process's part of a data-parallel run (train/distributed.h). Rank r of `world` draws the global batch of
// world x train.batch_size rows for (step, micro) and keeps rows [r B, (r + 1) B), so the ranks' shards are disjoint
// and together are the batch one process with world x B would draw. Evaluation and probes are not sharded.
struct DataShard {
  int64_t rank = 0, world = 1;
  // The ranks' equally shaped tensors stacked along a new dim 0 in rank order, without gradient (loss.*.gather).
  std::function<torch::Tensor(const torch::Tensor&)> all_gather;
};

class TrainingTask {
 public:
  virtual ~TrainingTask() = default;

  virtual const Tokenizer& tokenizer() const = 0;

  // Micro-step `micro` (0-based) of the `micro_steps` of optimizer step `step`: draws its batch, runs the forward
  // pass(es) and backpropagates loss / micro_steps into the model's gradients (a task with several passes, such
  // as cached contrastive training, runs them all here). The model is in training mode.
  virtual MicroStepLoss micro_step(Transformer& model, int64_t step, int64_t micro, int64_t micro_steps) = 0;

  // Validation metrics of the current weights (eval mode, no gradients; the model's mode is restored).
  virtual Evaluation evaluate(Transformer& model) = 0;

  // Geometry diagnostics on the task's fixed probe (keys as in metrics.jsonl), same mode rules as evaluate().
  virtual nlohmann::json probe(Transformer& model) = 0;

  virtual WorkPerStep work_per_step() const = 0;

  // Whether micro_step runs one backward pass, reaching each parameter at most once (cached contrastive training
  // runs one per chunk). Data-parallel training overlaps the gradient all-reduce with backward only then
  // (train/distributed.h GradientSync).
  virtual bool one_backward_per_micro_step() const { return true; }
};

// The TaskFactory of an objective's traits (config/objective.h).
template <class Task>
std::unique_ptr<TrainingTask> make_task_of(const Recipe& recipe, const std::string& run_dir, const c10::Device& device,
                                           const Note& note, const DataShard& shard) {
  return std::make_unique<Task>(recipe, run_dir, device, note, shard);
}

// The task of recipe.train.objective. Prepares its data in run_dir (tokenizer and cached files are built once and
// reused on resume); `note` receives one line per thing built or loaded.
std::unique_ptr<TrainingTask> make_task(const Recipe& recipe, const std::string& run_dir, torch::Device device,
                                        const Note& note, const DataShard& shard = {});

}  // namespace spread
