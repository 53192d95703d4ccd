// spread train RECIPE [--set section.key=value ...]
// spread train --resume RUN_DIR [--set ...]
#include <cxxopts.hpp>
#include <fmt/format.h>

#include "commands.h"
#include "options.h"
#include "spread/config/recipe.h"
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
      ("h,help", "show this help");
  options.parse_positional({"recipe"});
  auto args = parse_arguments(options, argc, argv);
  if (args.count("help")) {
    fmt::print("{}\n", options.help());
    return 0;
  }
  std::vector<std::string> overrides;
  if (args.count("set")) overrides = args["set"].as<std::vector<std::string>>();
  if (args.count("resume") && args.count("recipe"))
    throw UserError("give either a RECIPE or --resume RUN_DIR, not both (see `spread train --help`)");
  if (args.count("resume")) return train(recipe_of_run(args["resume"].as<std::string>(), overrides), TrainStart::Resume);
  if (!args.count("recipe")) throw UserError("missing RECIPE (see `spread train --help`)");
  return train(load_recipe(args["recipe"].as<std::string>(), overrides), TrainStart::Fresh);
}

}  // namespace spread::cli
