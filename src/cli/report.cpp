// spread report RUN_DIR [RUN_DIR ...] [--out FILE]: one self-contained HTML page of plots for a person to read.
// Default output: RUN_DIR/report.html for one run, ./report.html for several. Prints what it read (and what it
// skipped) per run, then the path of the page.
#include <cxxopts.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "commands.h"
#include "options.h"
#include "spread/log/report.h"
#include "spread/util/error.h"
#include "spread/util/file.h"

namespace spread::cli {

namespace {

void print_run(const report::RunData& r) {
  const auto& m = r.metrics;
  std::string line = fmt::format("{}: {} metrics lines", r.name, m.lines_read);
  if (m.lines_skipped) {
    line += fmt::format(", {} malformed line{} skipped", m.lines_skipped, m.lines_skipped == 1 ? "" : "s");
    if (m.partial_last_line) line += " (the last one is incomplete: still being written?)";
  }
  for (const auto& n : r.notes) line += "; " + n;
  std::cout << line << "\n";
}

}  // namespace

int cmd_report(int argc, char** argv) {
  cxxopts::Options options("spread report",
                           "Plot one or more run directories into one self-contained HTML page (no network, no "
                           "scripts): losses, learning rate, throughput, gradient norm, evaluation and geometry "
                           "diagnostics, a layer x step heatmap of mean_cos, and the recipes side by side.\n" +
                               std::string(kOutputRule));
  options.positional_help("RUN_DIR [RUN_DIR ...]");
  options.add_options()
      ("o,out", "output file (default: RUN_DIR/report.html for one run, ./report.html for several)",
       cxxopts::value<std::string>())
      ("title", "page title", cxxopts::value<std::string>()->default_value("spread report"))
      ("max-points", "points per curve after min/max downsampling", cxxopts::value<int64_t>()->default_value("1000"))
      ("h,help", "show this help")
      ("runs", "run directories", cxxopts::value<std::vector<std::string>>());
  options.parse_positional({"runs"});
  cxxopts::ParseResult args;
  try {
    args = parse_arguments(options, argc, argv);
  } catch (const cxxopts::exceptions::exception& e) {
    throw user_error("", 0, "", e.what(), "see spread report --help");
  }
  if (printed_help(options, args)) return 0;
  if (!args.count("runs")) throw user_error("", 0, "", "no run directory given", "spread report RUN_DIR [RUN_DIR ...]");
  const auto dirs = every_value(args, "runs");
  std::string out = args.count("out") ? args["out"].as<std::string>()
                    : dirs.size() == 1 ? (std::filesystem::path(dirs[0]) / "report.html").string()
                                       : std::string("report.html");
  const std::filesystem::path folder = std::filesystem::path(out).parent_path();
  if (!folder.empty()) make_directories(folder.string());  // as write_report does
  prepare_output_file(out, "--out");
  report::ReportOptions opt;
  opt.title = args["title"].as<std::string>();
  opt.max_points = std::size_t(int_option(args, "max-points", 4, 10'000'000));
  std::vector<report::RunData> runs;
  for (const auto& d : dirs) {
    runs.push_back(report::load_run_data(d));
    print_run(runs.back());
  }
  const auto charts = report::count_charts(runs);
  const std::size_t bytes = report::write_report(runs, out, opt);
  std::cout << fmt::format("wrote {} ({} charts, {:.0f} KB)\n", std::filesystem::absolute(out).lexically_normal().string(),
                           charts.line + charts.heatmap, bytes / 1024.0);
  return 0;
}

}  // namespace spread::cli
