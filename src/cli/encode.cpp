// spread encode --run RUN_DIR --in FILE --out FILE.npy: text embeddings of a trained encoder.
#include <cxxopts.hpp>
#include <fmt/format.h>

#include "commands.h"
#include "options.h"
#include "spread/eval/run_eval.h"
#include "spread/train/run.h"
#include "spread/util/error.h"
#include "spread/util/file.h"

namespace spread::cli {

int cmd_encode(int argc, char** argv) {
  cxxopts::Options options("spread encode", "Embed texts with a run's newest checkpoint: one float32 row per input "
                                            "text in a NumPy .npy file, L2-normalised unless --no-normalize.\n" +
                                                std::string(kOutputRule));
  options.add_options()
      ("run", "run directory", cxxopts::value<std::string>(), "RUN_DIR")
      ("in", "texts: .txt (one per line) or .jsonl (\"text\", with \"title\" prepended)", cxxopts::value<std::string>(),
       "FILE")
      ("out", "output .npy file", cxxopts::value<std::string>(), "FILE.npy")
      ("no-normalize", "keep the pooled vectors' norms")
      ("pooling", "mean, cls or last (default: the run's loss.contrastive.pooling)", cxxopts::value<std::string>())
      ("batch-size", "texts per forward pass", cxxopts::value<int64_t>()->default_value("64"))
      ("h,help", "show this help");
  auto args = parse_arguments(options, argc, argv);
  if (args.count("help")) {
    fmt::print("{}\n", options.help());
    return 0;
  }
  if (!args.count("run") || !args.count("in") || !args.count("out"))
    throw UserError("give --run RUN_DIR --in FILE --out FILE.npy (see `spread encode --help`)");
  EncodeRequest request;
  request.batch_size = int_option(args, "batch-size", 1, kMaxBatchSize);  // before the run is loaded
  request.in = args["in"].as<std::string>();
  request.out = args["out"].as<std::string>();
  prepare_output_file(request.out, "--out");
  LoadedRun run = load_run(args["run"].as<std::string>());
  request.normalize = !args.count("no-normalize");
  if (args.count("pooling")) request.pooling = args["pooling"].as<std::string>();
  const int64_t n = encode_file(run, request);
  fmt::print("wrote {} embeddings of width {} to {}\n", n, run.model->config().n_embd, request.out);
  return 0;
}

}  // namespace spread::cli
