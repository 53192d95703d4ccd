// spread eval --run RUN_DIR: validation loss, perplexity and bits per byte over the whole val split of an LM run;
// with --sts / --beir (or an encoder run's [eval] files) the embedding metrics instead; with --choices, an LM's
// zero-shot multiple-choice accuracy.
#include <cxxopts.hpp>
#include <fmt/format.h>
#include <algorithm>
#include <cmath>

#include "commands.h"
#include "options.h"
#include "spread/data/token_file.h"
#include "spread/eval/perplexity.h"
#include "spread/eval/run_eval.h"
#include "spread/interchange/loaded_run.h"
#include "spread/run/setup.h"
#include "spread/util/error.h"
#include "spread/util/file.h"

namespace spread::cli {
namespace {

// Numbers checked before the run is loaded, so a bad one fails at once.
struct Limits {
  int64_t batch_size, max_batches;
};

EvalResult lm_result(LoadedRun& run, const cxxopts::ParseResult& args, const Limits& limits) {
  if (args.count("text"))
    return evaluate_text_file(run, args["text"].as<std::string>(), limits.batch_size, limits.max_batches);
  if (run.model_folder)
    throw UserError("--model " + run.dir + ": a model folder has no validation split; give --text FILE");
  const auto val = validation_tokens(run.recipe, run.dir, run.tokenizer->vocab_size());
  return evaluate_split(run.model, *val, limits.batch_size, limits.max_batches, recipe_device(run.recipe));
}

int eval_lm(LoadedRun& run, const cxxopts::ParseResult& args, const Limits& limits) {
  if (args.count("per-query"))
    throw UserError("--per-query: only BEIR retrieval has queries, and " + run.dir + " is evaluated as a language model");
  EvalResult r = lm_result(run, args, limits);
  if (args.count("json")) {
    const nlohmann::json j = {{"step", run.step}, {"val_loss", r.loss}, {"val_ppl", r.ppl}, {"val_bpb", r.bpb},
                              {"tokens", r.tokens}};
    fmt::print("{}\n", j.dump());  // an infinite perplexity becomes null, not invalid JSON
  } else {
    fmt::print("run {} at step {}: val loss {:.4f}, perplexity {}, {:.4f} bits/byte over {} tokens\n", run.dir,
               run.step, r.loss, format_perplexity(r.ppl), r.bpb, r.tokens);
  }
  return 0;
}

int eval_choices(LoadedRun& run, const std::vector<ChoiceItem>& items, const cxxopts::ParseResult& args,
                 const Limits& limits) {
  const auto result = evaluate_choices_file(run, items, args["choices"].as<std::string>(), limits.batch_size,
                                            args.count("per-query") > 0);
  if (args.count("json")) fmt::print("{}\n", result.dump());
  else fmt::print("{}", format_choices_eval(result));
  if (args.count("out")) write_file_atomic(args["out"].as<std::string>(), result.dump(2) + "\n");
  return 0;
}

int eval_embeddings(LoadedRun& run, const cxxopts::ParseResult& args, const Limits& limits) {
  EmbeddingEvalRequest request;
  request.sts = args.count("sts") ? args["sts"].as<std::string>() : run.recipe.eval.sts;
  request.beir = args.count("beir") ? args["beir"].as<std::string>() : run.recipe.eval.beir;
  request.qrels = args.count("qrels") ? args["qrels"].as<std::string>() : run.recipe.eval.qrels;
  if (args.count("pooling")) request.pooling = args["pooling"].as<std::string>();
  request.batch_size = limits.batch_size;
  request.per_query = args.count("per-query") > 0;
  if (request.sts.empty() && request.beir.empty())
    throw UserError("nothing to evaluate: give --sts FILE and/or --beir DIR (see `spread eval --help`)");
  if (request.per_query && request.beir.empty())
    throw UserError("--per-query: only BEIR retrieval has queries; give --beir DIR as well");
  const auto result = evaluate_embeddings(run, request);
  if (args.count("json")) fmt::print("{}\n", result.dump());
  else fmt::print("{}", format_embedding_eval(result));
  if (args.count("out")) write_file_atomic(args["out"].as<std::string>(), result.dump(2) + "\n");
  return 0;
}

// "1,2,4" -> {1, 2, 4}; each a number >= 1, repeats left out.
std::vector<double> pool_factors(const std::string& text) {
  std::vector<double> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, end - start);
    size_t used = 0;
    double value = NAN;
    try {
      value = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || !std::isfinite(value) || value < 1)
      throw UserError("--pool-factors: '" + item + "' is not a number >= 1 (give a list such as 1,2,4)");
    if (std::find(out.begin(), out.end(), value) == out.end()) out.push_back(value);  // "1,1" evaluates once
    start = end + 1;
  }
  return out;
}

int eval_late_interaction(LoadedRun& run, const cxxopts::ParseResult& args, const Limits& limits) {
  LateInteractionEvalRequest request;
  request.beir = args.count("beir") ? args["beir"].as<std::string>() : run.recipe.eval.beir;
  if (request.beir.empty()) throw UserError("nothing to evaluate: give --beir DIR (see `spread eval --help`)");
  request.qrels = args.count("qrels") ? args["qrels"].as<std::string>() : run.recipe.eval.qrels;
  if (args.count("sts")) throw UserError("--sts: a late-interaction run is evaluated on retrieval (--beir) only");
  if (args.count("pool-factors")) request.pool_factors = pool_factors(args["pool-factors"].as<std::string>());
  request.batch_size = limits.batch_size;
  request.per_query = args.count("per-query") > 0;
  const auto result = evaluate_late_interaction(run, request);
  if (args.count("json")) fmt::print("{}\n", result.dump());
  else fmt::print("{}", format_late_interaction_eval(result));
  if (args.count("out")) write_file_atomic(args["out"].as<std::string>(), result.dump(2) + "\n");
  return 0;
}

}  // namespace

int cmd_eval(int argc, char** argv) {
  cxxopts::Options options("spread eval", "Evaluate a run's newest checkpoint: an LM's validation loss, perplexity "
                                          "and bits per byte, or an embedding model on STS and BEIR retrieval.\n" +
                                              std::string(kOutputRule));
  options.add_options()
      ("run", "run directory", cxxopts::value<std::string>(), "RUN_DIR")
      ("model", kModelOptionHelp, cxxopts::value<std::string>(), "DIR")
      ("sts", "STS file (STS-B CSV or SICK.txt): Spearman of cosine vs gold", cxxopts::value<std::string>(), "CSV")
      ("beir", "BEIR folder (corpus.jsonl, queries.jsonl, qrels/): nDCG@10, MRR@10, Recall@100",
       cxxopts::value<std::string>(), "DIR")
      ("qrels", "the BEIR split to score: qrels/NAME.tsv (default: the run's eval.qrels, else train.tsv when present, "
                "else the only one)", cxxopts::value<std::string>(), "NAME")
      ("choices", "LM: zero-shot multiple choice (acc, acc_norm as lm-evaluation-harness) on a JSONL file of "
                  "{\"context\", \"endings\", \"label\"} items", cxxopts::value<std::string>(), "FILE.jsonl")
      ("text", "LM: a text file to measure instead of the run's validation split (a model folder has none)",
       cxxopts::value<std::string>(), "FILE")
      ("pooling", "mean, cls or last (default: the run's loss.contrastive.pooling)", cxxopts::value<std::string>())
      ("pool-factors", "maxsim runs: Ward pool factors to evaluate, e.g. 1,2,3,4,6,8 (1 = unpooled; default 1)",
       cxxopts::value<std::string>(), "LIST")
      ("out", "also write the embedding or multiple-choice metrics to this JSON file", cxxopts::value<std::string>(), "FILE.json")
      ("per-query", "BEIR: also give each query's nDCG@10, MRR@10 and Recall@100 in the JSON (--out, --json); "
                    "--choices: each item's log-likelihoods")
      ("batch-size", "windows or texts per forward pass", cxxopts::value<int64_t>()->default_value("64"))
      ("max-batches", "LM: stop after N batches (0 = the whole split)", cxxopts::value<int64_t>()->default_value("0"))
      ("json", "print one JSON object instead of text")
      ("h,help", "show this help");
  auto args = parse_arguments(options, argc, argv);
  if (printed_help(options, args)) return 0;
  if (!has_model_source(args)) throw UserError("missing --run RUN_DIR or --model DIR (see `spread eval --help`)");
  const Limits limits{int_option(args, "batch-size", 1, kMaxBatchSize), int_option(args, "max-batches", 0, INT64_MAX)};
  if (args.count("pool-factors")) pool_factors(args["pool-factors"].as<std::string>());  // fails before loading
  if (args.count("out")) prepare_output_file(args["out"].as<std::string>(), "--out");
  std::vector<ChoiceItem> items;  // read before the model, so that a bad file fails at once
  if (args.count("choices")) items = read_choices(args["choices"].as<std::string>());
  LoadedRun run = load_run(model_source(args));
  if (args.count("choices")) return eval_choices(run, items, args, limits);
  if (run.recipe.objective().head == Head::token_vectors) return eval_late_interaction(run, args, limits);
  if (args.count("pool-factors"))
    throw UserError("--pool-factors: only a late-interaction run has token vectors to pool; " + run.dir + " is \"" +
                    name_of(run.recipe.train.objective) + "\"");
  const bool embeddings = args.count("sts") || args.count("beir") || run.recipe.is_encoder_objective();
  return embeddings ? eval_embeddings(run, args, limits) : eval_lm(run, args, limits);
}

}  // namespace spread::cli
