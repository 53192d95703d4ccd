#include "spread/train/schedule.h"

#include <cmath>

namespace spread {

double LrSchedule::at(int64_t step) const {
  if (step < warmup_steps) return lr * double(step + 1) / double(warmup_steps + 1);
  if (step >= total_steps) return min_lr;
  double ratio = double(step - warmup_steps) / double(total_steps - warmup_steps);
  return min_lr + 0.5 * (1.0 + std::cos(M_PI * ratio)) * (lr - min_lr);
}

}  // namespace spread
