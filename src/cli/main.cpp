// spread: the command line. Parses nothing itself beyond the subcommand; each subcommand lives in its own file.
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <cstring>
#include <cxxopts.hpp>
#include <filesystem>
#include <string>

#include "commands.h"
#include "spread/runtime/allocator.h"
#include "spread/runtime/blas.h"
#include "spread/util/bounded_message.h"
#include "spread/util/error.h"
#include "spread/util/file.h"

namespace {

constexpr const char* kUsage = R"(spread: a trainer for small language and embedding models

usage: spread <command> [options]     (spread <command> --help for its options)

exit codes: 0 done; 1 internal error; 2 bad input (arguments, recipe, data, checkpoint, files, a run directory
in use by another trainer); 3 training diverged (NaN/Inf); 130/143 training stopped by SIGINT/SIGTERM after
saving a checkpoint (resume with spread train --resume RUN_DIR)

commands:
  train      train from a recipe, or resume a run:  spread train RECIPE [--set key=value ...]
                                                     spread train --resume RUN_DIR
  eval       an LM's validation loss, perplexity and bits per byte; an encoder's STS and BEIR retrieval metrics;
             a late-interaction run's MaxSim retrieval at several pool factors
  encode     text embeddings of an encoder run as a .npy file
  generate   sample text from a run
  compare    a table of several runs side by side
  diagnose   SOCM, mean cosine and concentration of a run's token representations
  report     an HTML report of one or more runs
  pool       Ward token pooling of .npy token lists (multi-vector documents)
  calibrate  the Ward distance threshold that gives a late-interaction run a mean number of vectors per document
  split      carve a dev split from a BEIR folder's training queries (qrels/train.tsv and qrels/dev.tsv)
  mine       hard negatives for training pairs, as sentence-transformers' mine_hard_negatives picks them
  export     a run as a Hugging Face GPT-2 folder (LM) or a sentence-transformers folder (encoder)
  tokenize   token ids of text lines (--decode: text of id lists; --shards: token shards for pretraining) with a
             Hugging Face tokenizer or a run's own
  info       this build's LibTorch, whether it has CUDA and which GPUs it sees, BLAS and threads
  recipe     the recipe reference: every key, its type, default, allowed values and meaning (--keys)
)";

int dispatch(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    fmt::print("{}", kUsage);
    return argc < 2 ? 2 : 0;
  }
  std::string cmd = argv[1];
  int sub_argc = argc - 1;
  char** sub_argv = argv + 1;
  if (cmd == "train") return spread::cli::cmd_train(sub_argc, sub_argv);
  if (cmd == "eval") return spread::cli::cmd_eval(sub_argc, sub_argv);
  if (cmd == "encode") return spread::cli::cmd_encode(sub_argc, sub_argv);
  if (cmd == "generate") return spread::cli::cmd_generate(sub_argc, sub_argv);
  if (cmd == "compare") return spread::cli::cmd_compare(sub_argc, sub_argv);
  if (cmd == "diagnose") return spread::cli::cmd_diagnose(sub_argc, sub_argv);
  if (cmd == "report") return spread::cli::cmd_report(sub_argc, sub_argv);
  if (cmd == "pool") return spread::cli::cmd_pool(sub_argc, sub_argv);
  if (cmd == "recipe") return spread::cli::cmd_recipe(sub_argc, sub_argv);
  if (cmd == "calibrate") return spread::cli::cmd_calibrate(sub_argc, sub_argv);
  if (cmd == "export") return spread::cli::cmd_export(sub_argc, sub_argv);
  if (cmd == "tokenize") return spread::cli::cmd_tokenize(sub_argc, sub_argv);
  if (cmd == "info") return spread::cli::cmd_info(sub_argc, sub_argv);
  if (cmd == "mine") return spread::cli::cmd_mine(sub_argc, sub_argv);
  if (cmd == "split") return spread::cli::cmd_split(sub_argc, sub_argv);
  throw spread::UserError("unknown command '" + cmd + "' (run `spread --help` for the list)");
}

}  // namespace

int main(int argc, char** argv) {
  // Switches OpenBLAS's kernels (or, where it cannot, re-executes); before any matmul runs. `export` runs none: it
  // skips the switch (and with it any second start).
  if (argc < 2 || std::strcmp(argv[1], "export") != 0) spread::select_blas_core(argv);
  spread::tune_allocator();
  spread::apply_process_threads();
  try {
    return dispatch(argc, argv);
  } catch (const spread::UserError& e) {
    fmt::print(stderr, "error: {}\n", spread::bounded_message(e.what()));
    return 2;
  } catch (const std::filesystem::filesystem_error& e) {
    // The library turns the filesystem errors it expects into UserErrors; this catches any other one the same way.
    fmt::print(stderr, "error: {}\n", spread::bounded_message(spread::filesystem_user_error(e).what()));
    return 2;
  } catch (const cxxopts::exceptions::exception& e) {
    fmt::print(stderr, "error: {} (see `spread {} --help`)\n", spread::bounded_message(e.what()), argc > 1 ? argv[1] : "");
    return 2;
  } catch (const c10::Error& e) {
    fmt::print(stderr, "error (LibTorch): {}\n", e.what_without_backtrace());
    return 1;
  } catch (const std::exception& e) {
    // Bad input is a UserError (exit 2) wherever spread knows it; anything else that escapes is spread's own defect,
    // reported in one line with exit 1 instead of an abort and a core dump.
    fmt::print(stderr, "error (internal, please report it): {}\n", e.what());
    return 1;
  }
}
