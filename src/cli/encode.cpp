// spread encode --run RUN_DIR --in FILE --out FILE.npy: text embeddings of a trained encoder.
#include <cxxopts.hpp>
#include <fmt/format.h>

#include "commands.h"
#include "options.h"
#include "spread/eval/run_eval.h"
#include "spread/interchange/loaded_run.h"
#include "spread/util/error.h"
#include "spread/util/file.h"
#include "spread/util/output_over_input.h"

namespace spread::cli {

int cmd_encode(int argc, char** argv) {
  cxxopts::Options options("spread encode", "Embed texts with a run's newest checkpoint: one float32 row per input "
                                            "text in a NumPy .npy file, L2-normalised unless --no-normalize.\n" +
                                                std::string(kOutputRule));
  options.add_options()
      ("run", "run directory", cxxopts::value<std::string>(), "RUN_DIR")
      ("model", kModelOptionHelp, cxxopts::value<std::string>(), "DIR")
      ("in", "texts: .txt (one per line) or .jsonl (\"text\", with \"title\" prepended)", cxxopts::value<std::string>(),
       "FILE")
      ("out", "output .npy file", cxxopts::value<std::string>(), "FILE.npy")
      ("no-normalize", "keep the pooled vectors' norms (a sentence-transformers folder normalises only when it has "
                       "a Normalize module)")
      ("prompt-name", "a sentence-transformers folder's prompt, e.g. query (default: its default_prompt_name)",
       cxxopts::value<std::string>(), "NAME")
      ("prompt", "a prompt text to prepend instead (sentence-transformers folders)", cxxopts::value<std::string>(),
       "TEXT")
      ("pooling", "mean, cls, last, max or weightedmean (default: the run's loss.contrastive.pooling, a folder's Pooling)", cxxopts::value<std::string>())
      ("batch-size", "texts per forward pass", cxxopts::value<int64_t>()->default_value("64"))
      ("h,help", "show this help");
  auto args = parse_arguments(options, argc, argv);
  if (printed_help(options, args)) return 0;
  if (!has_model_source(args) || !args.count("in") || !args.count("out"))
    throw UserError("give --run RUN_DIR (or --model DIR) --in FILE --out FILE.npy (see `spread encode --help`)");
  EncodeRequest request;
  request.batch_size = int_option(args, "batch-size", 1, kMaxBatchSize);  // before the run is loaded
  request.in = args["in"].as<std::string>();
  request.out = args["out"].as<std::string>();
  refuse_output_over_input(request.out, request.in, "--out");
  prepare_output_file(request.out, "--out");
  LoadedRun run = load_run(model_source(args));
  request.normalize = !args.count("no-normalize");
  if (args.count("pooling")) request.pooling = args["pooling"].as<std::string>();
  if (args.count("prompt-name")) request.prompt_name = args["prompt-name"].as<std::string>();
  if (args.count("prompt")) request.prompt_text = args["prompt"].as<std::string>();
  const int64_t n = encode_file(run, request);
  fmt::print("wrote {} embeddings of width {} to {}\n", n, run.model->config().n_embd, request.out);
  return 0;
}

}  // namespace spread::cli
