#pragma once
// train.keep_best: the evaluation step whose metric was best so far, recorded in RUN/best.json
// ({"metric", "value", "step", "checkpoint"}) once that step's checkpoint is written, so that the checkpoint is kept
// through keep_last's pruning and `spread export --best` finds it.
#include <cstdint>
#include <optional>
#include <string>

namespace spread {

struct BestEvaluation {
  std::string metric;
  double value = 0;
  int64_t step = 0;
};

// Whether `value` beats `best`: lower for a metric whose name ends in "loss", higher for any other; NaN never does.
bool improves(const std::string& metric, double value, const std::optional<BestEvaluation>& best);

// RUN/best.json, or nullopt when there is none. UserError naming the file when it does not parse.
std::optional<BestEvaluation> read_best(const std::string& run_dir);

// Writes RUN/best.json (atomically).
void write_best(const std::string& run_dir, const BestEvaluation& best);

}  // namespace spread
