#pragma once
// What `spread tokenize` does: a file of text lines in, one JSON list of ids per line out (or, with decode, lines
// of JSON id lists in, one JSON string per line out), with
//   a Hugging Face tokenizer (a tokenizer.json, a vocab.txt, a vocab.json with merges.txt beside it, or a folder
//   holding one: data/hf/tokenizer.h), the post-processor's special tokens unless add_special_tokens is false, the
//   file's truncation applying as in the reference's encode(); or
//   a spread run directory: that run's own tokenizer (char, bpe, unigram or hf; data/tokenizer.h), the ids the run
//   trains on before encoder framing ([CLS] ... [SEP] is added per objective, not by the tokenizer).
// Lines are split at "\n" only (a "\r" stays in the text), a final "\n" ends the last line. The file is one batch, as
// the reference's encode_batch of its lines (tests/oracles/hf_tokenize_ref.py): each line is encoded alone on
// LibTorch's intra-op threads, then a BatchLongest padding in the tokenizer.json pads every line to the file's longest.
// Output: `out` is written to a temporary name beside it and renamed at the end (checked to be writable before any
// work); an empty `out` writes to stdout. Bad input (invalid UTF-8, a line that is not a JSON list of ids, an id
// outside the vocabulary): UserError "IN:LINE: ...", the first such line of the file.
#include <cstdint>
#include <memory>
#include <string>

namespace spread {

class Tokenizer;
namespace hf {
class Tokenizer;
}

// The tokenizer a --tokenizer PATH names, read the same way by every mode of `spread tokenize`: a spread run
// directory gives that run's own tokenizer (`run`), anything hf::Tokenizer::load reads a Hugging Face one (`hf`);
// exactly one of the two is set. file_truncation_and_padding: whether the Hugging Face file's own truncation and
// padding apply, as in the reference's encode (off for shards, whose documents are never cut). UserError naming
// `option` when PATH does not exist, and the loaders' errors for a file they cannot read.
struct TokenizerAtPath {
  std::shared_ptr<const Tokenizer> run;
  std::shared_ptr<const hf::Tokenizer> hf;
  std::string source;  // "hf tokenizer PATH" or "run tokenizer (KIND) of RUN_DIR"
};
TokenizerAtPath open_tokenizer_at(const std::string& path, const std::string& option,
                                  bool file_truncation_and_padding);

// Encoding a text takes memory in proportion to it, all at once; UserError at `where` (FILE:LINE) when `threads`
// texts of `bytes` each, encoded side by side, would need more than the memory available.
void refuse_text_beyond_memory(double bytes, int64_t threads, const std::string& where);

struct TokenizeRequest {
  std::string tokenizer;  // tokenizer file, folder, or run directory
  std::string in;
  std::string out;        // "" = stdout
  bool add_special_tokens = true;
  bool decode = false;
};

struct TokenizeResult {
  int64_t lines = 0;
  int64_t tokens = 0;   // ids written (encode) or read (decode)
  std::string source;   // what tokenised: "hf tokenizer PATH" or "run tokenizer (KIND) of RUN_DIR"
};

TokenizeResult tokenize_file(const TokenizeRequest& request);

}  // namespace spread
