#include "options.h"

#include <fmt/format.h>

#include "spread/interchange/hf_import.h"
#include "spread/util/error.h"

namespace spread::cli {
namespace {

template <class T>
T in_range(const cxxopts::ParseResult& args, const std::string& name, T lo, T hi) {
  const T v = args[name].as<T>();
  if (!(v >= lo && v <= hi))  // also false for NaN
    throw UserError(fmt::format("--{}: {} is out of range (allowed: {}..{})", name, v, lo, hi));
  return v;
}

}  // namespace

bool has_model_source(const cxxopts::ParseResult& args) { return args.count("run") || args.count("model"); }

std::string model_source(const cxxopts::ParseResult& args) {
  if (args.count("run") && args.count("model")) throw UserError("give --run RUN_DIR or --model DIR, not both");
  if (args.count("run")) return args["run"].as<std::string>();
  const std::string dir = args["model"].as<std::string>();
  if (!is_model_folder(dir))
    throw UserError(fmt::format("--model {}: not a model folder (no config.json or modules.json, or it is a run: "
                                "use --run)", dir));
  return dir;
}

cxxopts::ParseResult parse_arguments(cxxopts::Options& options, int argc, char** argv) {
  auto args = options.parse(argc, argv);
  if (!args.unmatched().empty())
    throw UserError(fmt::format("unexpected argument '{}' (see `{} --help`)", args.unmatched().front(),
                                options.program()));
  return args;
}

bool printed_help(cxxopts::Options& options, const cxxopts::ParseResult& args) {
  if (!args.count("help")) return false;
  fmt::print("{}\n", options.help());
  return true;
}

std::vector<std::string> every_value(const cxxopts::ParseResult& args, const std::string& name) {
  std::vector<std::string> values;
  for (const auto& kv : args.arguments())  // in command-line order, as given
    if (kv.key() == name) values.push_back(kv.value());
  return values;
}

int64_t int_option(const cxxopts::ParseResult& args, const std::string& name, int64_t lo, int64_t hi) {
  return in_range<int64_t>(args, name, lo, hi);
}

double real_option(const cxxopts::ParseResult& args, const std::string& name, double lo, double hi) {
  return in_range<double>(args, name, lo, hi);
}

}  // namespace spread::cli
