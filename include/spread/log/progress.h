#pragma once
// The console progress line: "step 120/2000 | loss 2.3456 | lr 9.97e-04 | 15234 tok/s | ETA 2m03s" (the unit is
// the task's: tok, pairs, texts).
// Step times exclude evaluation, diagnostics and checkpoints (call exclude_pause() after them).
#include <chrono>
#include <cstdint>
#include <string>

namespace spread {

class Progress {
 public:
  Progress(int64_t start_step, int64_t total_steps, int64_t items_per_step, std::string unit = "tok");
  void tick(int64_t step);            // a step finished
  void exclude_pause();               // time since the last tick was not training
  double last_step_seconds() const { return last_; }
  double items_per_s() const;         // over the steps since the previous line()
  std::string line(double loss, double lr);

 private:
  using Clock = std::chrono::steady_clock;
  int64_t step_ = 0, total_, items_per_step_;
  std::string unit_;
  Clock::time_point last_tick_;
  double last_ = 0, ema_ = 0;
  double window_seconds_ = 0;
  int64_t window_steps_ = 0;
};

// Progress of a pass over many items (texts to embed, lines to tokenize): at most one stderr line a second,
// "WHAT 1200/5000 UNIT | 830 UNIT/s | ETA 4s", and always the last one.
class CountProgress {
 public:
  explicit CountProgress(std::string what, std::string unit = "texts");
  void operator()(int64_t done, int64_t total);

 private:
  using Clock = std::chrono::steady_clock;
  std::string what_, unit_;
  Clock::time_point start_, last_;
};

// "1h02m", "2m03s", "45s"
std::string format_duration(double seconds);

}  // namespace spread
