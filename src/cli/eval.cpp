// spread eval --run RUN_DIR: validation loss, perplexity and bits per byte over the whole val split.
#include <cxxopts.hpp>
#include <fmt/format.h>

#include "commands.h"
#include "spread/data/token_file.h"
#include "spread/eval/perplexity.h"
#include "spread/train/run.h"
#include "spread/train/setup.h"
#include "spread/util/error.h"

namespace spread::cli {

int cmd_eval(int argc, char** argv) {
  cxxopts::Options options("spread eval", "Validation loss, perplexity and bits per byte of a run's newest checkpoint.");
  options.add_options()
      ("run", "run directory", cxxopts::value<std::string>(), "RUN_DIR")
      ("batch-size", "windows per forward pass", cxxopts::value<int64_t>()->default_value("16"))
      ("max-batches", "stop after N batches (0 = the whole split)", cxxopts::value<int64_t>()->default_value("0"))
      ("json", "print one JSON object instead of text")
      ("h,help", "show this help");
  auto args = options.parse(argc, argv);
  if (args.count("help")) {
    fmt::print("{}\n", options.help());
    return 0;
  }
  if (!args.count("run")) throw UserError("missing --run RUN_DIR (see `spread eval --help`)");
  LoadedRun run = load_run(args["run"].as<std::string>());
  TokenFile val(run.dir + "/val.bin");
  EvalResult r = evaluate_split(run.model, val, args["batch-size"].as<int64_t>(), args["max-batches"].as<int64_t>(),
                                recipe_device(run.recipe));
  if (args.count("json")) {
    fmt::print("{{\"step\": {}, \"val_loss\": {}, \"val_ppl\": {}, \"val_bpb\": {}, \"tokens\": {}}}\n", run.step,
               r.loss, r.ppl, r.bpb, r.tokens);
  } else {
    fmt::print("run {} at step {}: val loss {:.4f}, perplexity {:.3f}, {:.4f} bits/byte over {} tokens\n", run.dir,
               run.step, r.loss, r.ppl, r.bpb, r.tokens);
  }
  return 0;
}

}  // namespace spread::cli
