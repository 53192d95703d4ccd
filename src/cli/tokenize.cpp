// spread tokenize --tokenizer PATH --in FILE [--out FILE.jsonl] [--no-special] [--decode]
// spread tokenize --tokenizer PATH --shards OUT_DIR --in FILE_OR_GLOB [--in ...] [--shard-tokens N] [--val-tokens N]
//                 [--column text] [--eot TOKEN]
#include <cxxopts.hpp>
#include <fmt/format.h>

#include <algorithm>

#include "commands.h"
#include "options.h"
#include "spread/data/shard_writer.h"
#include "spread/data/tokenize_file.h"
#include "spread/util/error.h"

namespace spread::cli {
namespace {

int write_shards_command(const cxxopts::ParseResult& args) {
  ShardRequest request;
  request.tokenizer = args["tokenizer"].as<std::string>();
  request.out_dir = args["shards"].as<std::string>();
  request.inputs = every_value(args, "in");
  request.shard_tokens = args["shard-tokens"].as<int64_t>();
  request.val_tokens = args["val-tokens"].as<int64_t>();
  request.column = args["column"].as<std::string>();
  if (args.count("eot")) request.eot = args["eot"].as<std::string>();
  request.threads = int(int_option(args, "threads", 0, 4096));
  const ShardResult r = write_shards(request);
  fmt::print(stderr,
             "wrote {} shard(s) into {}: {} tokens ({} in validation) of {} documents, {:.1f} MB from {} file(s), in "
             "{:.1f} s ({:.2f} MB/s), with the {}, end of text id {}\n",
             r.shards.size(), request.out_dir, r.tokens, r.val_tokens, r.documents, double(r.input_bytes) / 1e6,
             r.files, r.seconds, double(r.input_bytes) / 1e6 / std::max(r.seconds, 1e-9), r.tokenizer, r.eot_id);
  return 0;
}

}  // namespace

int cmd_tokenize(int argc, char** argv) {
  cxxopts::Options options(
      "spread tokenize",
      "Token ids of each line of a text file, one JSON list per line, with a Hugging Face tokenizer or a run's own "
      "tokenizer; with --decode, the text of each line of JSON id lists, one JSON string per line.\n"
      "With --shards OUT_DIR: token shards for training (data.shards = \"OUT_DIR/train_*.bin\"), streamed from any "
      "amount of text on all threads. Each line of a text file is a document, and each line of a .jsonl file a "
      "JSON object holding one under --column; empty ones are skipped. A document's ids (without the "
      "post-processor's special tokens) are followed by the end-of-text id. The first whole documents up to "
      "--val-tokens go to val_000000.bin, the rest to train_000000.bin, train_000001.bin, ... of --shard-tokens "
      "each (a document may continue in the next shard). The files are llm.c shards (uint16 tokens, uint32 past "
      "65,536 ids) that also record their text's byte count (bits per byte); each is written under a temporary "
      "name and renamed when complete, and a folder that holds shards already is refused. Progress goes to "
      "stderr and OUT_DIR/tokenize.jsonl.");
  options.add_options()
      ("tokenizer", "a tokenizer.json, a vocab.txt (BERT), a vocab.json with merges.txt beside it (GPT-2), a folder "
       "holding one of these, or a spread run directory (its own tokenizer)", cxxopts::value<std::string>(), "PATH")
      ("in", "input: text, one per line (with --decode: a JSON list of ids per line); with --shards, a file or a "
       "quoted glob, repeatable, read in the order given (a glob's files in name order)",
       cxxopts::value<std::string>(), "FILE")
      ("out", "output file, written when complete (default: stdout)", cxxopts::value<std::string>(), "FILE.jsonl")
      ("no-special", "without special tokens: encode without the post-processor's (e.g. [CLS] ... [SEP]); with "
       "--decode, skip them in the text (the reference's decode default)")
      ("decode", "decode JSON id lists to text (special tokens kept unless --no-special)")
      ("shards", "write token shards into this folder (made when missing) instead of JSON lines",
       cxxopts::value<std::string>(), "OUT_DIR")
      ("shard-tokens", "tokens per training shard, 1 to 2147483647",
       cxxopts::value<int64_t>()->default_value("100000000"), "N")
      ("val-tokens", "tokens of whole documents for val_000000.bin first (0: no validation shard)",
       cxxopts::value<int64_t>()->default_value("0"), "N")
      ("column", "the key of a .jsonl line's document", cxxopts::value<std::string>()->default_value("text"), "KEY")
      ("threads", "with --shards: encoding threads (0 = every core)", cxxopts::value<int64_t>()->default_value("0"), "N")
      ("eot", "the token that ends each document (default: the tokenizer's own: <|endoftext|>, </s>, "
       "<|end_of_text|>, <eos> or [SEP], or a run tokenizer's end of sentence)", cxxopts::value<std::string>(),
       "TOKEN")
      ("h,help", "show this help");
  auto args = parse_arguments(options, argc, argv);
  if (printed_help(options, args)) return 0;
  if (!args.count("tokenizer") || !args.count("in"))
    throw UserError("give --tokenizer PATH --in FILE (see `spread tokenize --help`)");
  if (args.count("shards")) {
    if (args.count("out") || args.count("decode") || args.count("no-special"))
      throw UserError("--shards writes shards: leave out --out, --decode and --no-special");
    return write_shards_command(args);
  }
  for (const char* shard_option : {"shard-tokens", "val-tokens", "column", "eot", "threads"})
    if (args.count(shard_option))
      throw UserError(fmt::format("--{} is an option of --shards OUT_DIR", shard_option));
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
