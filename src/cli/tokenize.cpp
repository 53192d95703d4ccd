// spread tokenize --tokenizer PATH --in FILE [--out FILE.jsonl] [--no-special] [--decode]
#include <cxxopts.hpp>
#include <fmt/format.h>

#include "commands.h"
#include "options.h"
#include "spread/data/tokenize_file.h"
#include "spread/util/error.h"

namespace spread::cli {

int cmd_tokenize(int argc, char** argv) {
  cxxopts::Options options(
      "spread tokenize",
      "Token ids of each line of a text file, one JSON list per line, with a Hugging Face tokenizer or a run's own "
      "tokenizer; with --decode, the text of each line of JSON id lists, one JSON string per line.");
  options.add_options()
      ("tokenizer", "a tokenizer.json, a vocab.txt (BERT), a vocab.json with merges.txt beside it (GPT-2), a folder "
       "holding one of these, or a spread run directory (its own tokenizer)", cxxopts::value<std::string>(), "PATH")
      ("in", "input: text, one per line (with --decode: a JSON list of ids per line)", cxxopts::value<std::string>(),
       "FILE")
      ("out", "output file, written when complete (default: stdout)", cxxopts::value<std::string>(), "FILE.jsonl")
      ("no-special", "without special tokens: encode without the post-processor's (e.g. [CLS] ... [SEP]); with "
       "--decode, skip them in the text (the reference's decode default)")
      ("decode", "decode JSON id lists to text (special tokens kept unless --no-special)")
      ("h,help", "show this help");
  auto args = parse_arguments(options, argc, argv);
  if (printed_help(options, args)) return 0;
  if (!args.count("tokenizer") || !args.count("in"))
    throw UserError("give --tokenizer PATH --in FILE (see `spread tokenize --help`)");
  TokenizeRequest request;
  request.tokenizer = args["tokenizer"].as<std::string>();
  request.in = args["in"].as<std::string>();
  if (args.count("out")) request.out = args["out"].as<std::string>();
  request.add_special_tokens = !args.count("no-special");
  request.decode = args.count("decode") > 0;
  const TokenizeResult r = tokenize_file(request);
  if (!request.out.empty())
    fmt::print(stderr, "{} {} lines ({} ids) with the {} into {}\n", request.decode ? "decoded" : "tokenized", r.lines,
               r.tokens, r.source, request.out);
  return 0;
}

}  // namespace spread::cli
