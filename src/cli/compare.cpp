// spread compare RUN_DIR RUN_DIR ...: final validation numbers and last-layer mean cosine side by side, e.g. to
// read a dispersion lambda sweep at a glance.
#include <cxxopts.hpp>
#include <filesystem>
#include <fmt/format.h>

#include "commands.h"
#include "options.h"
#include "spread/eval/perplexity.h"
#include "spread/log/metrics_log.h"
#include "spread/run/setup.h"
#include "spread/util/error.h"

namespace spread::cli {
namespace {

struct RunSummary {
  std::string name;
  std::string dispersion = "off";
  std::string status;
  int64_t step = 0;
  double val_loss = NAN, val_ppl = NAN, val_bpb = NAN, mean_cos = NAN, batch_mean_cos = NAN;
};

double last_of(const nlohmann::json& array) {
  return array.is_array() && !array.empty() && array.back().is_number() ? array.back().get<double>() : NAN;
}

RunSummary summarize(const std::string& dir) {
  Recipe recipe = recipe_of_run(dir);
  RunSummary s;
  s.name = std::filesystem::path(dir).filename().string();
  if (recipe.loss.dispersion.enabled)
    s.dispersion = fmt::format("{} λ={:g}", recipe.loss.dispersion.variant, recipe.loss.dispersion.lambda);
  std::vector<std::string> events;
  for (const auto& j : read_metrics(dir + "/metrics.jsonl")) {
    s.step = std::max(s.step, j.value("step", int64_t(0)));
    if (j.contains("event") && j["event"].is_string()) events.push_back(j["event"]);
    if (j.contains("val_loss") && j["val_loss"].is_number()) {
      s.val_loss = j["val_loss"];
      s.val_ppl = j.value("val_ppl", NAN);
      s.val_bpb = j.value("val_bpb", NAN);
    }
    if (j.contains("mean_cos")) {
      s.mean_cos = last_of(j["mean_cos"]);
      s.batch_mean_cos = last_of(j.value("batch_mean_cos", nlohmann::json()));
    }
  }
  s.status = run_status(events);
  return s;
}

}  // namespace

int cmd_compare(int argc, char** argv) {
  cxxopts::Options options("spread compare", "Final validation numbers and last-layer mean cosine of several runs.");
  options.positional_help("RUN_DIR [RUN_DIR ...]");
  options.add_options()("runs", "run directories", cxxopts::value<std::vector<std::string>>())
      ("markdown", "print a Markdown table")("h,help", "show this help");
  options.parse_positional({"runs"});
  auto args = parse_arguments(options, argc, argv);
  if (printed_help(options, args)) return 0;
  if (!args.count("runs")) throw UserError("give at least one RUN_DIR (see `spread compare --help`)");
  std::vector<RunSummary> rows;
  for (const auto& dir : every_value(args, "runs")) rows.push_back(summarize(dir));
  const bool md = args.count("markdown") > 0;
  const char* fmt_row = md ? "| {:<24} | {:<18} | {:<18} | {:>6} | {:>8} | {:>8} | {:>8} | {:>8} | {:>8} |\n"
                           : "{:<24} {:<18} {:<18} {:>6} {:>8} {:>8} {:>8} {:>8} {:>8}\n";
  fmt::print(fmt::runtime(fmt_row), "run", "status", "dispersion", "step", "val_loss", "val_ppl", "val_bpb",
             "mean_cos", "batch_cos");
  if (md) fmt::print("|---|---|---|---:|---:|---:|---:|---:|---:|\n");
  auto num = [](double v, int digits) { return std::isnan(v) ? std::string("-") : fmt::format("{:.{}f}", v, digits); };
  auto ppl = [](double v) { return std::isnan(v) ? std::string("-") : format_perplexity(v); };
  for (const auto& r : rows)
    fmt::print(fmt::runtime(fmt_row), r.name, r.status, r.dispersion, r.step, num(r.val_loss, 4), ppl(r.val_ppl),
               num(r.val_bpb, 4), num(r.mean_cos, 4), num(r.batch_mean_cos, 4));
  return 0;
}

}  // namespace spread::cli
