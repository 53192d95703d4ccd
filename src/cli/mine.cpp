// spread mine --model DIR --beir DIR --out FILE.jsonl: hard negatives for training pairs, as
// sentence-transformers' mine_hard_negatives picks them (eval/mine_run.h).
#include <cxxopts.hpp>
#include <fmt/format.h>

#include <cstdint>
#include <optional>

#include "commands.h"
#include "options.h"
#include "spread/eval/mine_run.h"
#include "spread/interchange/loaded_run.h"
#include "spread/util/error.h"
#include "spread/util/file.h"

namespace spread::cli {
namespace {

std::optional<double> optional_real(const cxxopts::ParseResult& args, const std::string& name, double lo, double hi) {
  if (!args.count(name)) return std::nullopt;
  return real_option(args, name, lo, hi);
}

HardNegativeOptions negative_options(const cxxopts::ParseResult& args) {
  HardNegativeOptions o;
  o.num_negatives = int_option(args, "num-negatives", 1, 1 << 20);
  o.range_min = int_option(args, "range-min", 0, INT32_MAX);
  if (args.count("range-max")) o.range_max = int_option(args, "range-max", 1, INT32_MAX);
  o.max_score = optional_real(args, "max-score", -1, 1);
  o.min_score = optional_real(args, "min-score", -1, 1);
  o.absolute_margin = optional_real(args, "absolute-margin", -2, 2);
  o.relative_margin = optional_real(args, "relative-margin", 0, 1);
  o.sampling = args["sampling"].as<std::string>();
  if (o.sampling != "top" && o.sampling != "random")
    throw UserError("--sampling '" + o.sampling + "': use top or random");
  o.seed = uint64_t(int_option(args, "seed", 0, INT64_MAX));
  return o;
}

MineRequest request_of(const cxxopts::ParseResult& args) {
  MineRequest r;
  if (args.count("beir") == args.count("pairs"))
    throw UserError("give the pairs as --beir DIR or as --pairs FILE, one of them (see `spread mine --help`)");
  if (args.count("beir")) r.beir = args["beir"].as<std::string>();
  if (args.count("pairs")) r.pairs = args["pairs"].as<std::string>();
  if (args.count("qrels")) r.qrels = args["qrels"].as<std::string>();
  if (args.count("corpus")) r.corpus = args["corpus"].as<std::string>();
  if (!r.beir.empty() && !r.corpus.empty())
    throw UserError("--corpus: a BEIR folder brings its own corpus; give --corpus with --pairs only");
  if (!args.count("out")) throw UserError("missing --out FILE.jsonl (see `spread mine --help`)");
  r.out = args["out"].as<std::string>();
  r.options = negative_options(args);
  r.batch_size = int_option(args, "batch-size", 1, kMaxBatchSize);
  return r;
}

}  // namespace

int cmd_mine(int argc, char** argv) {
  cxxopts::Options options(
      "spread mine",
      "Mine hard negatives for (anchor, positive) pairs with a model's embeddings, by exact search on all threads, "
      "with the rules and defaults of sentence-transformers' mine_hard_negatives: the corpus is the documents given "
      "plus every positive; a query's own positives are never its negatives; a candidate within --absolute-margin "
      "of (or above (1 - --relative-margin) times) the query's hardest positive score, or outside --min-score / "
      "--max-score, is skipped. Writes JSONL rows {anchor, positive, negative_1..negative_N} for "
      "data.source = \"pairs\"; a pair for which fewer than N negatives qualify is left out.\n" +
          std::string(kOutputRule));
  options.add_options()
      ("model", kModelOptionHelp, cxxopts::value<std::string>(), "DIR")
      ("run", "an encoder run directory instead of a folder", cxxopts::value<std::string>(), "RUN_DIR")
      ("beir", "pairs and corpus from a BEIR folder (every relevant qrel)", cxxopts::value<std::string>(), "DIR")
      ("qrels", "the BEIR split to read: qrels/NAME.tsv (default train.tsv, else the only one)",
       cxxopts::value<std::string>(), "NAME")
      ("pairs", "pairs file (.tsv .csv .jsonl) with anchor and positive columns", cxxopts::value<std::string>(), "FILE")
      ("corpus", "with --pairs: more documents (.txt one a line, .jsonl, or a BEIR folder)",
       cxxopts::value<std::string>(), "FILE")
      ("out", "output .jsonl", cxxopts::value<std::string>(), "FILE.jsonl")
      ("num-negatives", "negatives per pair", cxxopts::value<int64_t>()->default_value("3"))
      ("range-min", "skip this many of the best-scoring candidates", cxxopts::value<int64_t>()->default_value("0"))
      ("range-max", "consider only this many best-scoring candidates (default: range-min + num-negatives + the most "
                    "positives of a query; 10 x num-negatives with a margin or --max-score)",
       cxxopts::value<int64_t>(), "N")
      ("absolute-margin", "skip candidates with score + margin > the hardest positive's score",
       cxxopts::value<double>(), "M")
      ("relative-margin", "skip candidates with score > (1 - margin) x the hardest positive's score",
       cxxopts::value<double>(), "M")
      ("max-score", "skip candidates scoring above this cosine", cxxopts::value<double>(), "S")
      ("min-score", "skip candidates scoring below this cosine", cxxopts::value<double>(), "S")
      ("sampling", "top (the best-scoring qualified candidates) or random (drawn among them)",
       cxxopts::value<std::string>()->default_value("top"))
      ("seed", "random sampling's seed", cxxopts::value<int64_t>()->default_value("0"))
      ("batch-size", "texts per forward pass", cxxopts::value<int64_t>()->default_value("32"))
      ("json", "print the summary as one JSON object")
      ("h,help", "show this help");
  auto args = parse_arguments(options, argc, argv);
  if (printed_help(options, args)) return 0;
  if (!has_model_source(args)) throw UserError("missing --model DIR or --run RUN_DIR (see `spread mine --help`)");
  const MineRequest request = request_of(args);  // every option checked before the model is loaded
  prepare_output_file(request.out, "--out");
  LoadedRun run = load_run(model_source(args));
  if (!run.recipe.is_encoder_objective())
    throw UserError(run.dir + " is a \"" + name_of(run.recipe.train.objective) + "\" model: mining needs a text encoder");
  const nlohmann::json s = mine_to_file(run, request);
  if (args.count("json")) {
    fmt::print("{}\n", s.dump());
    return 0;
  }
  fmt::print("mined {} rows of {} negatives for {} queries ({} pairs; {} left out with too few) over {} documents in "
             "{:.1f} s (encoding {:.1f} s, search {:.1f} s); mean score: positives {:.4f}, negatives {:.4f}; wrote {}\n",
             s["rows"].get<int64_t>(), request.options.num_negatives, s["queries"].get<int64_t>(),
             s["pairs"].get<int64_t>(), s["left_out"].get<int64_t>(), s["documents"].get<int64_t>(),
             s["encode_seconds"].get<double>() + s["search_seconds"].get<double>(), s["encode_seconds"].get<double>(),
             s["search_seconds"].get<double>(), s["positive_score_mean"].get<double>(),
             s["negative_score_mean"].get<double>(), request.out);
  return 0;
}

}  // namespace spread::cli
