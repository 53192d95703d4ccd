#pragma once
// One optimizer step (the task's micro-steps, clip, update), shared by the trainer and by bench_step, which times
// the same step under two objectives in one process.
#include <string>
#include <utility>
#include <vector>
#include <torch/types.h>

#include "spread/config/recipe.h"
#include "spread/model/transformer.h"
#include "spread/tasks/task.h"
#include "spread/train/distributed.h"
#include "spread/train/optimizer.h"

namespace spread {

// nanoGPT's AdamW groups, decay (matrices, embeddings) and no_decay (norms, biases), with the recipe's [train]
// options; with train.optimizer = "muon", the blocks' matrices first go to a Muon group at train.muon_lr.
void add_optimizer_groups(FlatOptimizer& optimizer, Transformer& model, const TrainConfig& train);

struct StepResult {
  double loss = 0;                                    // weighted total, averaged over the micro-steps
  std::vector<std::pair<std::string, double>> parts;  // unweighted terms, for the log
  double grad_norm = 0;                               // before clipping
  bool finite = true;                                 // false: the update was skipped
  double comm_s = 0;  // data-parallel: seconds in collectives after backward (waits included; overlap hides the rest)
};

struct StepInputs {
  Transformer& model;
  FlatOptimizer& optimizer;
  TrainingTask& task;
  const TrainConfig& train;
  ProcessGroup* group = nullptr;  // data-parallel: gradients and logged losses are averaged over its ranks
  GradientSync* sync = nullptr;   // with a group: averages the gradients during the last micro-step's backward
};

// Step number `step` (0-based: it seeds the batches and the objective's subsamples) at every group's peak rate times
// `lr_scale` (LrSchedule::scale), with train.grad_accum micro-steps whose gradients add up. The optimizer is left untouched when the loss or the
// gradient norm is not finite. With a group, the gradients are averaged over its ranks once, during the last
// micro-step's backward pass (sync) or after it (accumulation stays local), and so are the losses returned: every
// rank then sees the same numbers and takes the same decisions.
StepResult optimizer_step(const StepInputs& in, int64_t step, double lr_scale);

}  // namespace spread
