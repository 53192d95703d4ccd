#pragma once
// metrics.jsonl: one JSON object per line, flushed as written, so a report can read a run while it trains.
#include <cstdio>
#include <string>
#include <nlohmann/json.hpp>

namespace spread {

class MetricsLog {
 public:
  // Opens run_dir/metrics.jsonl for appending. When keep_up_to_step >= 0, lines of later steps (written after
  // the checkpoint a resumed run continues from) are dropped first, so the file reads as one uninterrupted run.
  // An empty run_dir gives a log that writes nothing (the ranks other than 0 of a data-parallel run).
  explicit MetricsLog(const std::string& run_dir, int64_t keep_up_to_step = -1);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void write(const nlohmann::json& line);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

// Every line of a metrics file that parses as a JSON object; `malformed` counts the others.
std::vector<nlohmann::json> read_metrics(const std::string& path, int* malformed = nullptr);

// How a run's log ends, from its "event" values in file order: "finished", "diverged", "interrupted", or "running
// or stopped" (started or resumed and no end yet: training now, or killed).
std::string run_status(const std::vector<std::string>& events);

}  // namespace spread
