// spread train RECIPE [--set section.key=value ...]
// spread train --resume RUN_DIR [--set ...]
// spread train --nproc N ...: N data-parallel workers on this host (train/launch.h)
#include <cstdlib>
#include <cxxopts.hpp>
#include <fmt/format.h>

#include "commands.h"
#include "options.h"
#include "spread/config/recipe.h"
#include "spread/run/setup.h"
#include "spread/train/launch.h"
#include "spread/train/trainer.h"
#include "spread/util/error.h"

namespace spread::cli {

int cmd_train(int argc, char** argv) {
  cxxopts::Options options("spread train", "Train a model from a recipe, or resume a run.");
  options.positional_help("RECIPE");
  options.add_options()
      ("recipe", "recipe file (TOML)", cxxopts::value<std::string>())
      ("resume", "continue the run in RUN_DIR (= <run.out_dir>/<run.name>) from its newest valid checkpoint",
       cxxopts::value<std::string>(), "RUN_DIR")
      ("set", "override a recipe key, e.g. --set train.lr=3e-4 (repeatable)",
       cxxopts::value<std::vector<std::string>>(), "KEY=VALUE")
      ("nproc", "start N data-parallel workers on this host (Gloo over the loopback address); under torchrun, "
       "leave it out", cxxopts::value<int>(), "N")
      ("h,help", "show this help");
  options.parse_positional({"recipe"});
  auto args = parse_arguments(options, argc, argv);
  if (printed_help(options, args)) return 0;
  if (args.count("nproc") && args["nproc"].as<int>() != 1) {
    std::vector<std::string> worker_args{argv[0]};  // "train" and the same arguments without --nproc
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--nproc") ++i;
      else if (a.rfind("--nproc=", 0) != 0) worker_args.push_back(a);
    }
    if (std::getenv("WORLD_SIZE") != nullptr && std::string(std::getenv("WORLD_SIZE")) != "1")
      throw UserError("--nproc starts its own workers; under torchrun (WORLD_SIZE is set) leave it out");
    return launch_local_workers(args["nproc"].as<int>(), worker_args);
  }
  const std::vector<std::string> overrides = every_value(args, "set");
  if (args.count("resume") && args.count("recipe"))
    throw UserError("give either a RECIPE or --resume RUN_DIR, not both (see `spread train --help`)");
  if (args.count("resume")) return train(recipe_of_run(args["resume"].as<std::string>(), overrides), TrainStart::Resume);
  if (!args.count("recipe")) throw UserError("missing RECIPE (see `spread train --help`)");
  return train(load_recipe(args["recipe"].as<std::string>(), overrides), TrainStart::Fresh);
}

}  // namespace spread::cli
