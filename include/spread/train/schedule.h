#pragma once
// Learning rate at a step (0-based), nanoGPT's schedule:
//   step < warmup:            lr * (step + 1) / (warmup + 1)
//   warmup <= step < total:   min_lr + 0.5 * (1 + cos(pi * (step - warmup) / (total - warmup))) * (lr - min_lr)
//   step >= total:            min_lr
#include <cstdint>

namespace spread {

struct LrSchedule {
  double lr = 1e-3;
  double min_lr = 1e-4;
  int64_t warmup_steps = 100;
  int64_t total_steps = 2000;

  double at(int64_t step) const;
};

}  // namespace spread
