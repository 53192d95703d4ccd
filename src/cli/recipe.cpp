// spread recipe --keys [--markdown]: every recipe key with its type, default, allowed values and meaning.
#include <cxxopts.hpp>
#include <fmt/format.h>

#include "commands.h"
#include "options.h"
#include "spread/config/recipe.h"
#include "spread/util/error.h"

namespace spread::cli {

int cmd_recipe(int argc, char** argv) {
  cxxopts::Options options("spread recipe",
                           "The recipe reference: every key with its type, default, allowed values and meaning "
                           "(docs/recipe_reference.md is --keys --markdown).");
  options.add_options()
      ("keys", "list every key")
      ("markdown", "as the Markdown page of docs/recipe_reference.md")
      ("h,help", "show this help");
  auto args = parse_arguments(options, argc, argv);
  if (printed_help(options, args)) return 0;
  if (!args.count("keys")) throw UserError("give --keys (see `spread recipe --help`)");
  fmt::print("{}", recipe_reference(args.count("markdown") > 0));
  return 0;
}

}  // namespace spread::cli
