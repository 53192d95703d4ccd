#pragma once
// Learning rate at a step (0-based). Every schedule warms up as nanoGPT does, lr * (step + 1) / (warmup + 1) for
// step < warmup, and ends at min_lr from total_steps on. Between them:
//   cosine: min_lr + 0.5 * (1 + cos(pi * r)) * (lr - min_lr),  r = (step - warmup) / (total - warmup)  (nanoGPT)
//   linear: lr - r * (lr - min_lr), the same r
//   wsd:    warmup, stable, decay (Hägele et al. 2024, "Scaling Laws and Compute-Optimal Training Beyond Fixed
//           Training Durations"; modded-nanogpt's warmdown): lr until the last decay_fraction of the steps, then
//           from lr to min_lr over them, r = (step - decay_start) / (total - decay_start), decay_start =
//           total - round(decay_fraction * total), in the decay shape:
//             linear: 1 - r    cosine: 0.5 * (1 + cos(pi * r))    sqrt: 1 - sqrt(r)  (the paper's "1 - sqrt")
#include <cstdint>
#include <string>

namespace spread {

struct TrainConfig;

enum class ScheduleKind { cosine, linear, wsd };
enum class DecayShape { linear, cosine, sqrt };

struct LrSchedule {
  double lr = 1e-3;
  double min_lr = 1e-4;
  int64_t warmup_steps = 100;
  int64_t total_steps = 2000;
  ScheduleKind kind = ScheduleKind::cosine;
  double decay_fraction = 0.2;  // wsd: the final share of total_steps that decays
  DecayShape decay_shape = DecayShape::linear;

  double at(int64_t step) const;
  // at(step) / lr: the factor every parameter group's own peak rate is multiplied by (with lr = 0, the shape of
  // the schedule on a peak of 1, so that a Muon group still trains).
  double scale(int64_t step) const;
  // wsd: the first step of the decay.
  int64_t decay_start() const;
};

// The recipe's train.schedule, train.lr, train.min_lr, train.warmup_steps, train.max_steps, train.decay_fraction
// and train.decay_shape (the recipe has checked them).
LrSchedule make_schedule(const TrainConfig& train);

}  // namespace spread
