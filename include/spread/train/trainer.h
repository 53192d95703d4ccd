#pragma once
// The training loop. It owns the order of things (sample, forward, objective, backward, clip, step, log, eval,
// diagnose, checkpoint) and delegates each to the unit that knows it; it knows no specific loss.
#include <string>
#include <vector>

#include "spread/config/recipe.h"

namespace spread {

enum class TrainStart { Fresh, Resume };

// Exit codes of a training run (bad input is a UserError, exit code 2).
inline constexpr int kExitOk = 0;
inline constexpr int kExitDiverged = 3;

// Fresh: creates recipe.run_dir() (refusing one that already holds checkpoints) and trains from step 0.
// Resume: continues the newest valid checkpoint of recipe.run_dir(); the losses that follow are bitwise those of
// an uninterrupted run on CPU. SIGINT/SIGTERM save a checkpoint and return kExitOk.
int train(const Recipe& recipe, TrainStart start);

// `spread train --resume RUN_DIR [--set ...]`: the recipe saved in the run dir, with overrides applied.
Recipe recipe_of_run(const std::string& run_dir, const std::vector<std::string>& overrides = {});

}  // namespace spread
