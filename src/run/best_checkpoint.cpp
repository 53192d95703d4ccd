#include "spread/run/best_checkpoint.h"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "spread/run/checkpoint.h"
#include "spread/util/error.h"
#include "spread/util/file.h"

namespace spread {
namespace {

std::string best_file(const std::string& run_dir) { return (std::filesystem::path(run_dir) / "best.json").string(); }

bool lower_is_better(const std::string& metric) {
  return metric.size() >= 4 && metric.compare(metric.size() - 4, 4, "loss") == 0;
}

}  // namespace

bool improves(const std::string& metric, double value, const std::optional<BestEvaluation>& best) {
  if (std::isnan(value)) return false;
  if (!best) return true;
  return lower_is_better(metric) ? value < best->value : value > best->value;
}

std::optional<BestEvaluation> read_best(const std::string& run_dir) {
  const std::string path = best_file(run_dir);
  if (!std::filesystem::exists(path)) return std::nullopt;
  const auto text = read_whole_file(path);
  const auto j = nlohmann::json::parse(text ? *text : "", nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.value("metric", nlohmann::json()).is_string() ||
      !j.value("value", nlohmann::json()).is_number() || !j.value("step", nlohmann::json()).is_number_integer())
    throw user_error(path, 0, "", "is not a best-checkpoint record {\"metric\", \"value\", \"step\"}",
                     "delete it (the next evaluation writes it anew)");
  return BestEvaluation{j["metric"].get<std::string>(), j["value"].get<double>(), j["step"].get<int64_t>()};
}

void write_best(const std::string& run_dir, const BestEvaluation& best) {
  const nlohmann::json j = {
      {"metric", best.metric}, {"value", best.value}, {"step", best.step},
      {"checkpoint", std::filesystem::relative(checkpoint_path(run_dir, best.step), run_dir).string()}};
  write_file_atomic(best_file(run_dir), j.dump(1) + "\n");
}

}  // namespace spread
