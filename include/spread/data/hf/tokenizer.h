#pragma once
// Hugging Face tokenizers in C++: a tokenizer.json (or the older vocab.txt / vocab.json + merges.txt layouts) read
// into the same five-stage pipeline the reference library (`tokenizers`, Rust) runs, with the same results:
//   normalizer -> pre-tokenizer -> model (WordPiece, BPE) -> post-processor, and a decoder for the way back,
// with added tokens split out before normalisation. Each component type of the JSON format is one small unit
// (src/data/hf/); a "type" or option that is not implemented is a UserError naming it (exit 2), never an
// approximation. Unicode data (categories, normalisation forms, case mappings) comes from ICU.
//
// The promise, checked against the reference library on real vocabularies and text (tests/test_hf_tokenizer.cpp,
// tests/oracles/check_tokenizers.sh): the same ids, tokens, offsets, masks and decoded text as `tokenizers`' Encoding
// and decode() for every line of input that is valid UTF-8; invalid UTF-8 is a UserError naming the byte offset.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace spread::hf {

// One encoded text, as the reference's Encoding. Offsets are byte offsets into the input text (the Rust
// library's); char_offsets() gives the code-point offsets that the Python binding reports.
struct Encoding {
  std::vector<int32_t> ids;
  std::vector<int32_t> type_ids;
  std::vector<std::string> tokens;
  std::vector<std::pair<int64_t, int64_t>> offsets;  // [begin, end) in bytes of the original text; (0, 0) for
                                                     // tokens the post-processor added
  std::vector<uint8_t> attention_mask;
  std::vector<uint8_t> special_tokens_mask;
};

// Byte offsets of `enc` into `text` as code-point offsets (what Python's Encoding.offsets shows).
std::vector<std::pair<int64_t, int64_t>> char_offsets(const Encoding& enc, std::string_view text);

class Tokenizer {
 public:
  // `path`: a tokenizer.json; a vocab.txt (BERT: lower-casing from a tokenizer_config.json beside it when present,
  // else true); a vocab.json with merges.txt beside it (GPT-2); or a folder holding tokenizer.json, else
  // vocab.txt, else vocab.json + merges.txt. UserError naming the file and the problem (not JSON, no "model",
  // ids out of range, duplicate tokens, a bad merges line, a Git LFS pointer instead of the file, an
  // unsupported component or option).
  // truncation_and_padding false: the file's truncation and padding settings are not read (a caller that sets
  // lengths itself, as a run does), saving the copy without them that it would otherwise parse again.
  static std::unique_ptr<Tokenizer> load(const std::string& path, bool truncation_and_padding = true);
  virtual ~Tokenizer() = default;

  // add_special_tokens: run the post-processor (e.g. "[CLS] ... [SEP]"). The file's truncation and padding
  // settings apply when it has them, as in the reference.
  virtual Encoding encode(std::string_view text, bool add_special_tokens = true) const = 0;
  virtual Encoding encode_pair(std::string_view first, std::string_view second,
                               bool add_special_tokens = true) const = 0;
  // The texts encoded on `threads` threads (0 = all of LibTorch's intra-op threads); the same results as encode()
  // one by one, padded to the batch's longest when the file's padding says so.
  virtual std::vector<Encoding> encode_batch(const std::vector<std::string>& texts, bool add_special_tokens = true,
                                             int threads = 0) const = 0;
  // As the reference's decode(ids, skip_special_tokens). UserError for an id outside the vocabulary.
  virtual std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = true) const = 0;

  // Vocabulary size with the added tokens (the reference's get_vocab_size(with_added_tokens=True)).
  virtual int64_t vocab_size() const = 0;
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  virtual std::optional<std::string> id_to_token(int32_t id) const = 0;
  // The special added tokens' ids (e.g. [CLS] [SEP] [PAD] [MASK] [UNK], or <|endoftext|>), in id order.
  virtual std::vector<int32_t> special_token_ids() const = 0;
  // The file this tokenizer was read from, as JSON text in the tokenizer.json format (the legacy layouts
  // converted to it), so a run can keep an exact copy.
  virtual std::string to_json() const = 0;
};

// `base` with `tokens` added as the reference's add_tokens adds plain strings (AddedToken(content): not special,
// normalized, no stripping, not single-word), as PyLate adds its "[Q] " / "[D] " prefixes: a token the model's
// vocabulary has keeps its id, a new one takes the next free id; one already among the added tokens is left as it
// is (`base` itself comes back when nothing is new). The result's to_json() lists them with their ids, so a saved
// copy loads the same. `file` names the source in errors; truncation_and_padding as in load().
std::unique_ptr<Tokenizer> add_tokens(std::unique_ptr<Tokenizer> base, const std::vector<std::string>& tokens,
                                      const std::string& file, bool truncation_and_padding = true);

}  // namespace spread::hf
