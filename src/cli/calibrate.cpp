// spread calibrate --run RUN_DIR --docs PATH --target-tokens T: the Ward distance threshold whose mean number of
// vectors per document is T, for a late-interaction run (library: eval/run_eval.h, calibrate_run).
#include <cxxopts.hpp>
#include <fmt/format.h>

#include "commands.h"
#include "options.h"
#include "spread/eval/run_eval.h"
#include "spread/interchange/loaded_run.h"
#include "spread/util/error.h"

namespace spread::cli {
namespace {

// The means a threshold can give lie between every merge done and none; a target outside them gets the nearest.
void warn_if_unreachable(const nlohmann::json& r) {
  const double target = r["target_tokens"].get<double>(), most = r["unpooled_mean"].get<double>(),
               fewest = r["fewest_mean"].get<double>();
  if (target > most)
    fmt::print(stderr, "warning: --target-tokens {:g} is unreachable: these documents have {:.2f} vectors each "
                       "unpooled, the most a threshold can keep (threshold 0 keeps them all)\n", target, most);
  else if (target < fewest)
    fmt::print(stderr, "warning: --target-tokens {:g} is unreachable: merging all that can merge leaves {:.2f} "
                       "vectors per document, the fewest a threshold can give\n", target, fewest);
}

}  // namespace

int cmd_calibrate(int argc, char** argv) {
  cxxopts::Options options("spread calibrate",
                           "The Ward distance threshold (spread pool --distance-threshold) whose mean number of "
                           "vectors per document over a sample of documents equals a target, for a late-interaction "
                           "(maxsim) run. A mean budget, not a per-document cap.");
  options.add_options()
      ("run", "run directory of a maxsim run", cxxopts::value<std::string>(), "RUN_DIR")
      ("model", kModelOptionHelp, cxxopts::value<std::string>(), "DIR")
      ("docs", "documents: .txt (one per line), .jsonl, or a BEIR folder", cxxopts::value<std::string>(), "PATH")
      ("target-tokens", "wanted mean vectors per document, protected tokens included", cxxopts::value<double>(), "T")
      ("max-docs", "use the first N documents", cxxopts::value<int64_t>()->default_value("1000"), "N")
      ("batch-size", "documents per forward pass", cxxopts::value<int64_t>()->default_value("32"))
      ("json", "print one JSON object instead of text")
      ("h,help", "show this help");
  auto args = parse_arguments(options, argc, argv);
  if (printed_help(options, args)) return 0;
  if (!has_model_source(args) || !args.count("docs") || !args.count("target-tokens"))
    throw UserError("give --run RUN_DIR --docs PATH --target-tokens T (see `spread calibrate --help`)");
  CalibrateRequest request;
  request.docs = args["docs"].as<std::string>();
  request.target_tokens = real_option(args, "target-tokens", 1, 1e9);
  request.max_docs = int_option(args, "max-docs", 1, INT64_MAX);
  request.batch_size = int_option(args, "batch-size", 1, kMaxBatchSize);
  LoadedRun run = load_run(model_source(args));
  const nlohmann::json r = calibrate_run(run, request);
  warn_if_unreachable(r);
  if (args.count("json")) {
    fmt::print("{}\n", r.dump());
    return 0;
  }
  fmt::print("run {} at step {}: {} documents, {:.1f} vectors each unpooled\n", r["run"].get<std::string>(),
             r["step"].get<int64_t>(), r["documents"].get<int64_t>(), r["unpooled_mean"].get<double>());
  fmt::print("distance threshold {:.6g} ({} distance): mean {:.2f} vectors per document (target {:g})\n",
             r["threshold"].get<double>(), r["ward_distance"].get<std::string>(), r["achieved_mean"].get<double>(),
             r["target_tokens"].get<double>());
  return 0;
}

}  // namespace spread::cli
