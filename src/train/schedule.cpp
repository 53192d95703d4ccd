#include "spread/train/schedule.h"

#include <algorithm>
#include <cmath>

#include "spread/config/recipe.h"

namespace spread {
namespace {

// The share of (lr - min_lr) left at progress r in [0, 1] of a decay.
double remaining(DecayShape shape, double r) {
  switch (shape) {
    case DecayShape::linear: return 1.0 - r;
    case DecayShape::cosine: return 0.5 * (1.0 + std::cos(M_PI * r));
    case DecayShape::sqrt: return 1.0 - std::sqrt(r);
  }
  return 0.0;
}

ScheduleKind schedule_kind(const std::string& name) {
  if (name == "linear") return ScheduleKind::linear;
  if (name == "wsd") return ScheduleKind::wsd;
  return ScheduleKind::cosine;
}

DecayShape decay_shape(const std::string& name) {
  if (name == "cosine") return DecayShape::cosine;
  if (name == "sqrt") return DecayShape::sqrt;
  return DecayShape::linear;
}

}  // namespace

int64_t LrSchedule::decay_start() const {
  return total_steps - int64_t(std::llround(decay_fraction * double(total_steps)));
}

double LrSchedule::at(int64_t step) const {
  if (step < warmup_steps) return lr * double(step + 1) / double(warmup_steps + 1);
  if (step >= total_steps) return min_lr;
  const int64_t start = kind == ScheduleKind::wsd ? std::max(decay_start(), warmup_steps) : warmup_steps;
  if (step < start) return lr;
  const double r = double(step - start) / double(total_steps - start);
  const DecayShape shape = kind == ScheduleKind::cosine ? DecayShape::cosine
                           : kind == ScheduleKind::linear ? DecayShape::linear
                                                          : decay_shape;
  return min_lr + remaining(shape, r) * (lr - min_lr);
}

double LrSchedule::scale(int64_t step) const {
  if (lr > 0) return at(step) / lr;
  // lr = 0 (AdamW's parameters frozen) must not freeze Muon's: the schedule's shape on a peak of 1 (min_lr is 0).
  LrSchedule unit = *this;
  unit.lr = 1.0;
  return unit.at(step);
}

LrSchedule make_schedule(const TrainConfig& t) {
  return {t.lr, t.min_lr, t.warmup_steps, t.max_steps, schedule_kind(t.schedule), t.decay_fraction,
          decay_shape(t.decay_shape)};
}

}  // namespace spread
