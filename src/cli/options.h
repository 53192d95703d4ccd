#pragma once
// What every subcommand checks beyond what cxxopts does: an argument it cannot place, and a number outside an
// option's range, are UserErrors naming the argument or option (exit 2), as recipe keys are.
#include <cxxopts.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace spread::cli {

// Windows or texts per forward pass: far above what fits in memory, so that a typo fails here and not in LibTorch.
inline constexpr int64_t kMaxBatchSize = 1 << 20;

// The rule of every output (util/file.h), for the --help of the commands that write one.
inline constexpr const char* kOutputRule =
    "An existing output is replaced (written under a temporary name in its folder, then renamed, so a failed "
    "write keeps the previous one); a symbolic link at the output's name is refused, not replaced or written "
    "through.";

// Parses argv; an argument left over (a second RECIPE, a path whose option name was forgotten) is an error
// instead of being ignored, since the run would then not be the one the user asked for.
cxxopts::ParseResult parse_arguments(cxxopts::Options& options, int argc, char** argv);

// --help: prints the command's help and returns true (the command then exits 0).
bool printed_help(cxxopts::Options& options, const cxxopts::ParseResult& args);

// Every value given to a repeatable option, each whole: as<std::vector<std::string>>() would split each at its
// commas (cxxopts' list syntax), and `--set data.columns=[q,doc]` would reach the recipe as two broken keys.
std::vector<std::string> every_value(const cxxopts::ParseResult& args, const std::string& name);

// The commands that read a model take --run RUN_DIR or --model DIR (a Hugging Face or sentence-transformers
// folder, interchange/hf_import.h). model_source: the one given; UserError when both are, or when --model is no
// model folder.
inline constexpr const char* kModelOptionHelp =
    "a Hugging Face or sentence-transformers model folder (config.json + model.safetensors) instead of a run";
bool has_model_source(const cxxopts::ParseResult& args);
std::string model_source(const cxxopts::ParseResult& args);

// The value of --name, which must lie in [lo, hi] (and be finite).
int64_t int_option(const cxxopts::ParseResult& args, const std::string& name, int64_t lo, int64_t hi);
double real_option(const cxxopts::ParseResult& args, const std::string& name, double lo, double hi);

}  // namespace spread::cli
