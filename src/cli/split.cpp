// spread split --beir DIR --out DIR: a dev split carved from a BEIR folder's training queries (data/beir_split.h).
#include <cxxopts.hpp>
#include <fmt/format.h>

#include "commands.h"
#include "options.h"
#include "spread/data/beir_split.h"
#include "spread/util/error.h"

namespace spread::cli {

int cmd_split(int argc, char** argv) {
  cxxopts::Options options(
      "spread split",
      "Carve a dev split from a BEIR folder's training queries: writes a BEIR folder with the same corpus and "
      "queries, qrels/train.tsv (the remaining queries) and qrels/dev.tsv (a seeded sample of dev-fraction of the "
      "queries that have a relevant document; no query in both). Train with data.qrels = \"train\", evaluate with "
      "eval.qrels = \"dev\".");
  options.add_options()
      ("beir", "the BEIR folder to split", cxxopts::value<std::string>(), "DIR")
      ("qrels", "its split to carve: qrels/NAME.tsv (default train.tsv, else the only one)",
       cxxopts::value<std::string>(), "NAME")
      ("out", "the folder to write", cxxopts::value<std::string>(), "DIR")
      ("dev-fraction", "share of the queries that go to dev", cxxopts::value<double>()->default_value("0.1"))
      ("seed", "the draw's seed", cxxopts::value<int64_t>()->default_value("1"))
      ("h,help", "show this help");
  auto args = parse_arguments(options, argc, argv);
  if (printed_help(options, args)) return 0;
  if (!args.count("beir") || !args.count("out"))
    throw UserError("give --beir DIR --out DIR (see `spread split --help`)");
  BeirSplitRequest request;
  request.source = args["beir"].as<std::string>();
  if (args.count("qrels")) request.qrels = args["qrels"].as<std::string>();
  request.out = args["out"].as<std::string>();
  request.dev_fraction = real_option(args, "dev-fraction", 0, 1);
  request.seed = uint64_t(int_option(args, "seed", 0, INT64_MAX));
  const BeirSplitResult r = split_beir_queries(request);
  fmt::print("wrote {}: {} train queries ({} qrels rows), {} dev queries ({} rows), seed {}\n", request.out,
             r.train_queries.size(), r.train_rows, r.dev_queries.size(), r.dev_rows, request.seed);
  return 0;
}

}  // namespace spread::cli
