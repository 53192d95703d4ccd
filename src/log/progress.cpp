#include "spread/log/progress.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace spread {

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  auto total = int64_t(std::llround(s));
  if (total >= 3600) return fmt::format("{}h{:02d}m", total / 3600, (total % 3600) / 60);
  if (total >= 60) return fmt::format("{}m{:02d}s", total / 60, total % 60);
  return fmt::format("{}s", total);
}

Progress::Progress(int64_t start_step, int64_t total_steps, int64_t items_per_step, std::string unit)
    : step_(start_step), total_(total_steps), items_per_step_(items_per_step), unit_(std::move(unit)),
      last_tick_(Clock::now()) {}

void Progress::tick(int64_t step) {
  auto now = Clock::now();
  last_ = std::chrono::duration<double>(now - last_tick_).count();
  last_tick_ = now;
  step_ = step;
  // The first steps of a process are slow (allocator warm-up); the EMA forgets them quickly.
  ema_ = ema_ == 0 ? last_ : 0.9 * ema_ + 0.1 * last_;
  window_seconds_ += last_;
  ++window_steps_;
}

void Progress::exclude_pause() { last_tick_ = Clock::now(); }

double Progress::items_per_s() const {
  return window_seconds_ > 0 ? double(window_steps_ * items_per_step_) / window_seconds_ : 0.0;
}

std::string Progress::line(double loss, double lr) {
  std::string out = fmt::format("step {}/{} | loss {:.4f} | lr {:.2e} | {:.0f} {}/s | ETA {}", step_, total_, loss,
                                lr, items_per_s(), unit_, format_duration(ema_ * double(total_ - step_)));
  window_seconds_ = 0;
  window_steps_ = 0;
  return out;
}

CountProgress::CountProgress(std::string what, std::string unit)
    : what_(std::move(what)), unit_(std::move(unit)), start_(Clock::now()), last_(start_) {}

void CountProgress::operator()(int64_t done, int64_t total) {
  const auto now = Clock::now();
  if (done < total && std::chrono::duration<double>(now - last_).count() < 1.0) return;
  last_ = now;
  const double s = std::chrono::duration<double>(now - start_).count(), rate = double(done) / std::max(s, 1e-9);
  fmt::print(stderr, "{} {}/{} {} | {:.0f} {}/s | ETA {}\n", what_, done, total, unit_, rate, unit_,
             format_duration(double(total - done) / std::max(rate, 1e-9)));
}

}  // namespace spread
