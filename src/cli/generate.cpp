// spread generate --run RUN_DIR --prompt TEXT [--max-new-tokens N --temperature T --top-k K --seed S]
#include <cxxopts.hpp>
#include <fmt/format.h>

#include <cstdio>

#include "commands.h"
#include "options.h"
#include "spread/data/text_check.h"
#include "spread/interchange/loaded_run.h"
#include "spread/model/generate.h"
#include "spread/util/error.h"

namespace spread::cli {

int cmd_generate(int argc, char** argv) {
  cxxopts::Options options("spread generate", "Sample text from a run's newest checkpoint.");
  options.add_options()
      ("run", "run directory", cxxopts::value<std::string>(), "RUN_DIR")
      ("model", kModelOptionHelp, cxxopts::value<std::string>(), "DIR")
      ("prompt", "text to continue", cxxopts::value<std::string>()->default_value("\n"))
      ("max-new-tokens", fmt::format("tokens to sample (at most {})", kMaxNewTokens),
       cxxopts::value<int64_t>()->default_value("200"))
      ("temperature", "softmax temperature (0 = greedy)", cxxopts::value<double>()->default_value("0.8"))
      ("top-k", "sample among the k most likely tokens (0 = all)", cxxopts::value<int64_t>()->default_value("200"))
      ("seed", "random seed", cxxopts::value<int64_t>()->default_value("1337"))
      ("h,help", "show this help");
  auto args = parse_arguments(options, argc, argv);
  if (printed_help(options, args)) return 0;
  if (!has_model_source(args)) throw UserError("missing --run RUN_DIR or --model DIR (see `spread generate --help`)");
  SampleOptions o;
  o.max_new_tokens = int_option(args, "max-new-tokens", 0, kMaxNewTokens);
  o.temperature = real_option(args, "temperature", 0, 100);
  o.top_k = int_option(args, "top-k", 0, INT64_MAX);
  o.seed = uint64_t(int_option(args, "seed", 0, INT64_MAX));
  const std::string prompt = args["prompt"].as<std::string>();
  check_option_text(prompt, "--prompt");
  LoadedRun run = load_run(model_source(args));
  generate_text(run, prompt, o, [](const std::string& text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);  // the text of each token as it is drawn, not all of it at the end
  });
  std::fputs("\n", stdout);
  return 0;
}

}  // namespace spread::cli
