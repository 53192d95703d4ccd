#include "spread/log/metrics_log.h"

#include <filesystem>
#include <fstream>

#include "spread/util/error.h"
#include "spread/util/file.h"
#include "spread/util/json_depth.h"

namespace spread {

std::vector<nlohmann::json> read_metrics(const std::string& path, int* malformed) {
  std::vector<nlohmann::json> lines;
  std::ifstream in = open_input_file(path, std::ios::in);
  std::string line;
  int bad = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = json_too_deep(line) ? nlohmann::json() : nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object()) lines.push_back(std::move(j));
    else ++bad;
  }
  if (malformed) *malformed = bad;
  return lines;
}

std::string run_status(const std::vector<std::string>& events) {
  for (auto e = events.rbegin(); e != events.rend(); ++e) {
    if (*e == "end") return "finished";
    if (*e == "diverged" || *e == "interrupted") return *e;
    if (*e == "start" || *e == "resume") break;
  }
  return "running or stopped";
}

MetricsLog::MetricsLog(const std::string& run_dir, int64_t keep_up_to_step)
    : path_(run_dir.empty() ? "" : (std::filesystem::path(run_dir) / "metrics.jsonl").string()) {
  if (run_dir.empty()) return;  // a log that keeps nothing
  if (keep_up_to_step >= 0 && std::filesystem::exists(path_)) {
    std::string kept;
    for (const auto& j : read_metrics(path_))
      if (j.value("step", int64_t(0)) <= keep_up_to_step) kept += j.dump() + "\n";
    write_file_atomic(path_, kept);
  }
  file_ = std::fopen(path_.c_str(), "a");
  if (!file_) throw user_error(path_, 0, "", "cannot open the metrics log for writing");
}

MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

void MetricsLog::write(const nlohmann::json& line) {
  if (!file_) return;
  std::string s = line.dump() + "\n";
  std::fwrite(s.data(), 1, s.size(), file_);
  std::fflush(file_);
}

}  // namespace spread
