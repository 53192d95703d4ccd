// spread pool: Ward token pooling of .npy token lists (one document per file; include/spread/pooling/ward_files.h).
//   spread pool --in DIR --out DIR (--pool-factor F | --max-tokens T | --distance-threshold D) [--protected 1]
//               [--ward-distance cosine|euclidean] [--threads 0]
#include <cxxopts.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cmath>

#include "commands.h"
#include "options.h"
#include "spread/pooling/ward_files.h"
#include "spread/util/error.h"

namespace spread::cli {
namespace {

// --name's value as a number at least `min` (an integer when `integer`), or a one-line error naming the option.
// Values are parsed here rather than by cxxopts, whose message for "2.5" does not say which option it was.
double number_option(const cxxopts::ParseResult& args, const std::string& name, double min, bool integer) {
  const std::string text = args[name].as<std::string>();
  size_t used = 0;
  double value = NAN;
  try {
    value = integer ? double(std::stoll(text, &used)) : std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !std::isfinite(value) || value < min)
    throw UserError(fmt::format("--{}: '{}' is not {} >= {}", name, text, integer ? "an integer" : "a number", min));
  return value;
}

// The one budget given, range-checked.
WardBudget parse_budget(const cxxopts::ParseResult& args) {
  const int given = int(args.count("pool-factor") + args.count("max-tokens") + args.count("distance-threshold"));
  if (given != 1)
    throw UserError(fmt::format("give exactly one budget: --pool-factor F, --max-tokens T or --distance-threshold D "
                                "({} given)", given));
  if (args.count("pool-factor")) return WardBudget::pool_factor(number_option(args, "pool-factor", 1, false));
  if (args.count("max-tokens")) return WardBudget::max_tokens(int64_t(number_option(args, "max-tokens", 1, true)));
  return WardBudget::distance_threshold(number_option(args, "distance-threshold", 0, false));
}

WardPoolOptions parse_options(const cxxopts::ParseResult& args) {
  WardPoolOptions opt;
  opt.protected_tokens = int64_t(number_option(args, "protected", 0, true));
  const std::string distance = args["ward-distance"].as<std::string>();
  if (distance != "cosine" && distance != "euclidean")
    throw UserError("--ward-distance: '" + distance + "' is not a distance (use cosine or euclidean)");
  opt.distance = parse_ward_distance(distance);
  return opt;
}

}  // namespace

int cmd_pool(int argc, char** argv) {
  cxxopts::Options options("spread pool",
                           "Ward token pooling (docs/design.md §6.3) of .npy token lists, one n x d float32/float64 file per "
                           "document.\nWrites OUT/<name>.npy (pooled vectors, float64) and OUT/<name>.labels.npy "
                           "(int64 cluster of each token, -1 = protected).\n" + std::string(kOutputRule));
  options.add_options()
      ("in", "directory of token lists (<name>.npy)", cxxopts::value<std::string>(), "DIR")
      ("out", "output directory (created if missing)", cxxopts::value<std::string>(), "DIR")
      ("pool-factor", "k = max(floor(m / F), 1) clusters of the m unprotected tokens", cxxopts::value<std::string>(),
       "F")
      ("max-tokens", "at most T output vectors, protected tokens included", cxxopts::value<std::string>(), "T")
      ("distance-threshold", "merge while the Ward height is <= D", cxxopts::value<std::string>(), "D")
      ("protected", "leading tokens kept as they are", cxxopts::value<std::string>()->default_value("1"), "P")
      ("ward-distance", "cosine (1 - cos) or euclidean (sqrt(2 - 2 cos))",
       cxxopts::value<std::string>()->default_value("cosine"))
      ("threads", "worker threads over documents (0 = all cores)", cxxopts::value<std::string>()->default_value("0"))
      ("h,help", "show this help");
  auto args = options.parse(argc, argv);
  if (printed_help(options, args)) return 0;
  if (!args.count("in") || !args.count("out"))
    throw UserError("give --in DIR --out DIR and one budget (see `spread pool --help`)");
  const WardBudget budget = parse_budget(args);
  const WardPoolOptions opt = parse_options(args);
  const int threads = int(number_option(args, "threads", 0, true));

  const auto start = std::chrono::steady_clock::now();
  auto last_report = start;
  auto progress = [&](int64_t done, int64_t total) {
    const auto now = std::chrono::steady_clock::now();
    if (done < total && now - last_report < std::chrono::seconds(2)) return;
    last_report = now;
    if (total > 1000 || now - start > std::chrono::seconds(2)) fmt::print(stderr, "pooled {}/{} documents\n", done, total);
  };
  const PoolFilesSummary s =
      pool_token_files(args["in"].as<std::string>(), args["out"].as<std::string>(), budget, opt, threads, progress);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print(
      "pooled {} documents: {} tokens -> {} vectors ({:.1f} -> {:.1f} per document) in {:.2f} s (pooling "
      "{:.4f} s, the rest reading and writing); wrote {}\n",
      s.documents, s.tokens, s.vectors, double(s.tokens) / double(s.documents), double(s.vectors) / double(s.documents),
      seconds, s.pooling_seconds, args["out"].as<std::string>());
  return 0;
}

}  // namespace spread::cli
