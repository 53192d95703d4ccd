// spread generate --run RUN_DIR --prompt TEXT [--max-new-tokens N --temperature T --top-k K --seed S]
#include <cxxopts.hpp>
#include <fmt/format.h>

#include "commands.h"
#include "spread/model/generate.h"
#include "spread/train/run.h"
#include "spread/train/setup.h"
#include "spread/util/error.h"

namespace spread::cli {

int cmd_generate(int argc, char** argv) {
  cxxopts::Options options("spread generate", "Sample text from a run's newest checkpoint.");
  options.add_options()
      ("run", "run directory", cxxopts::value<std::string>(), "RUN_DIR")
      ("prompt", "text to continue", cxxopts::value<std::string>()->default_value("\n"))
      ("max-new-tokens", "tokens to sample", cxxopts::value<int64_t>()->default_value("200"))
      ("temperature", "softmax temperature (0 = greedy)", cxxopts::value<double>()->default_value("0.8"))
      ("top-k", "sample among the k most likely tokens (0 = all)", cxxopts::value<int64_t>()->default_value("200"))
      ("seed", "random seed", cxxopts::value<uint64_t>()->default_value("1337"))
      ("h,help", "show this help");
  auto args = options.parse(argc, argv);
  if (args.count("help")) {
    fmt::print("{}\n", options.help());
    return 0;
  }
  if (!args.count("run")) throw UserError("missing --run RUN_DIR (see `spread generate --help`)");
  SampleOptions o;
  o.max_new_tokens = args["max-new-tokens"].as<int64_t>();
  o.temperature = args["temperature"].as<double>();
  o.top_k = args["top-k"].as<int64_t>();
  o.seed = args["seed"].as<uint64_t>();
  if (o.max_new_tokens < 0 || o.temperature < 0 || o.top_k < 0)
    throw UserError("--max-new-tokens, --temperature and --top-k must not be negative");
  LoadedRun run = load_run(args["run"].as<std::string>());
  auto prompt = run.tokenizer->encode(args["prompt"].as<std::string>());
  if (prompt.empty()) prompt = run.tokenizer->encode("\n");
  auto ids = generate(run.model, prompt, o, recipe_device(run.recipe));
  fmt::print("{}\n", run.tokenizer->decode(ids));
  return 0;
}

}  // namespace spread::cli
