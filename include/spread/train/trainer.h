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
inline constexpr int kExitDiverged = 3;     // NaN/Inf: max_bad_steps in a row, or in the state to be saved
inline constexpr int kExitPeerLost = 4;      // data-parallel: another rank failed, died or stopped answering
inline constexpr int kExitSignalBase = 128;  // + the signal: 130 for SIGINT, 143 for SIGTERM, as shells expect

// Fresh: creates recipe.run_dir() (refusing one that already holds checkpoints) and trains from step 0.
// Resume: continues the newest valid checkpoint of recipe.run_dir(); the losses that follow are bitwise those of
// an uninterrupted run on CPU. Both hold the run's lock (run/run_lock.h) from before anything is written.
// SIGINT/SIGTERM save a checkpoint and return kExitSignalBase + signal. A checkpoint is never written with NaN or
// Inf: the run stops as diverged instead (an event "diverged" with its reason in metrics.jsonl).
// Data parallel (train/distributed.h) when WORLD_SIZE > 1: every rank calls train() with the same recipe; rank 0
// alone writes the run directory (log, checkpoints), evaluates and probes.
int train(const Recipe& recipe, TrainStart start);

}  // namespace spread
