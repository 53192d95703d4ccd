#pragma once
// One optimizer step (sample, forward, objective, backward, clip, update), shared by the trainer and by
// bench_step, which times the same step under two objectives in one process.
#include <string>
#include <utility>
#include <vector>
#include <torch/types.h>

#include "spread/config/recipe.h"
#include "spread/data/loader.h"
#include "spread/losses/objective.h"
#include "spread/model/transformer.h"
#include "spread/train/optimizer.h"

namespace spread {

// AdamW with nanoGPT's decay / no-decay groups and the recipe's [train] options.
void add_adamw_groups(FlatAdamW& optimizer, Transformer& model, const TrainConfig& train);

struct StepResult {
  double loss = 0;                                    // weighted total, averaged over the micro-steps
  std::vector<std::pair<std::string, double>> parts;  // unweighted terms, for the log
  double grad_norm = 0;                               // before clipping
  bool finite = true;                                 // false: the update was skipped
};

struct StepInputs {
  Transformer& model;
  FlatAdamW& optimizer;
  const Objective& objective;
  const WindowSampler& sampler;
  const TrainConfig& train;
  torch::Device device;
};

// Step number `step` (0-based: it seeds the batches and the objective's subsamples) at learning rate `lr`. The
// optimizer is left untouched when the loss or the gradient norm is not finite.
StepResult optimizer_step(const StepInputs& in, int64_t step, double lr);

}  // namespace spread
