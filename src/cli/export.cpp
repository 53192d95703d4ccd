// spread export --run RUN_DIR --out DIR [--step N]: the run as a Hugging Face / sentence-transformers folder.
#include <cxxopts.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdint>

#include "commands.h"
#include "options.h"
#include "spread/interchange/export.h"
#include "spread/run/best_checkpoint.h"
#include "spread/util/error.h"

namespace spread::cli {
namespace {

int64_t best_step(const std::string& run_dir, bool step_given) {
  if (step_given) throw UserError("give --step N or --best, not both");
  const auto best = read_best(run_dir);
  if (!best)
    throw UserError(run_dir + " has no best.json: it was trained without train.keep_best, or no evaluation has "
                    "finished yet (give --step N, or leave both out for the newest checkpoint)");
  return best->step;
}

}  // namespace

int cmd_export(int argc, char** argv) {
  cxxopts::Options options("spread export",
                           "Write a run's checkpoint in the layouts Python loads: a causal LM as Hugging Face GPT-2 "
                           "(config.json + model.safetensors), an encoder as MegatronBert inside a "
                           "sentence-transformers folder, a maxsim model as MegatronBert with PyLate's 1_Dense "
                           "head.\n" + std::string(kOutputRule));
  options.add_options()
      ("run", "run directory", cxxopts::value<std::string>(), "RUN_DIR")
      ("out", "folder to write (new, empty, or an earlier export, which is replaced)", cxxopts::value<std::string>(),
       "DIR")
      ("step", "the checkpoint of this step (default: the newest intact one)", cxxopts::value<int64_t>(), "N")
      ("best", "the checkpoint of the best evaluation (train.keep_best; RUN_DIR/best.json)")
      ("h,help", "show this help");
  auto args = parse_arguments(options, argc, argv);
  if (printed_help(options, args)) return 0;
  if (!args.count("run") || !args.count("out"))
    throw UserError("give --run RUN_DIR --out DIR (see `spread export --help`)");
  ExportRequest request;
  request.run_dir = args["run"].as<std::string>();
  request.out_dir = args["out"].as<std::string>();
  if (request.out_dir.empty()) throw UserError("--out: give a folder name");
  if (args.count("step")) request.step = int_option(args, "step", 0, 99'999'999);  // step_XXXXXXXX.ckpt
  if (args.count("best")) request.step = best_step(request.run_dir, args.count("step") > 0);
  const auto start = std::chrono::steady_clock::now();
  const ExportResult r = export_run(request);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("exported step {} as {} to {} ({:.1f} MB of weights, {:.2f} s)\n", r.step, r.layout, request.out_dir,
             double(r.bytes) / 1e6, seconds);
  return 0;
}

}  // namespace spread::cli
