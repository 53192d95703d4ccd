#pragma once
// Tokenizers: `char` (one id per Unicode code point seen in the training text, sorted, as nanoGPT's char
// level) and sentencepiece `bpe` / `unigram` (trained from the recipe's text when no model file is given).
// Sentencepiece runs inside a small C-ABI shim loaded into its own linker namespace (see src/shim/).
//
// Round trip: decode(encode(text)) == text for valid UTF-8 (for char: made of vocabulary characters). Models trained
// here use identity normalization, no dummy prefix, kept whitespace and byte fallback, so characters unseen in
// training encode as UTF-8 byte pieces. (One sentencepiece limit remains, measured: a literal U+2581 '▁' in the
// text decodes as a space, because sentencepiece uses it as its whitespace marker.)
//
// Files in a run directory: tokenizer.json {"kind", "vocab_size"} always, plus tokenizer.chars (char) or
// tokenizer.model (a sentencepiece model, usable with any sentencepiece tool), or tokenizer.hf.json (kind hf: a
// Hugging Face tokenizer used as it is, data/hf_run_tokenizer.h).
#include "spread/config/recipe.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace spread {

// Reserved ids of encoders (data/special_tokens.h); -1 where the tokenizer has none.
struct SpecialIds {
  int32_t pad = -1, cls = -1, sep = -1, mask = -1;
  int32_t query = -1, document = -1;  // [Q] and [D]; -1 in tokenizers of runs made before they were reserved
  // MLM's random replacement tokens are drawn from [0, ordinary_end); -1 means [0, pad), the base vocabulary below
  // spread's appended ids. A Hugging Face vocabulary (BERT's [PAD] is 0) sets its whole size, as BERT's collator.
  int32_t ordinary_end = -1;
  int64_t replacement_range() const { return ordinary_end >= 0 ? ordinary_end : pad; }
  bool present() const { return pad >= 0; }
  bool has_markers() const { return query >= 0 && document >= 0; }
  bool is_special(int32_t id) const {
    return present() && (id == pad || id == cls || id == sep || id == mask || id == query || id == document);
  }
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Throws UserError for invalid UTF-8 (naming the byte offset) and, for char, for characters outside the
  // vocabulary.
  virtual std::vector<int32_t> encode(const std::string& text) const = 0;
  // Throws UserError for ids outside [0, vocab_size).
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual std::string kind() const = 0;  // "char", "bpe", "unigram" or "hf" (data/hf_run_tokenizer.h)
  // Writes the tokenizer's files into run_dir (tokenizer.model for sentencepiece, tokenizer.chars for char).
  virtual void save(const std::string& run_dir) const = 0;
  // Sentencepiece's reserved <s> and </s> ids (1 and 2 in models trained here); -1 when there are none (char).
  virtual int32_t bos_id() const { return -1; }
  virtual int32_t eos_id() const { return -1; }
  virtual SpecialIds special_ids() const { return {}; }
  // The id of a vocabulary entry spelled as the tokenizer file lists it (data/hf_run_tokenizer.h); nullopt when
  // there is no such entry, or the kind has no entry names (char, bpe, unigram).
  virtual std::optional<int32_t> entry_id(const std::string& entry) const { return std::nullopt; }
  // Whether encode lower-cases each text first (kind hf, tokenizer.lowercase: sentence-transformers' do_lower_case).
  virtual bool lowercases() const { return false; }
};

struct TokenizerSpec {
  std::string kind = "bpe";   // char | bpe | unigram | hf
  int64_t vocab_size = 2048;  // ignored by char and hf
  std::string model_path;     // an existing sentencepiece .model to use instead of training one
  std::string hf_path;        // kind hf: a tokenizer.json, vocab.txt, vocab.json or a folder of them
  std::string query_marker, document_marker;  // kind hf: the entries used as [Q] / [D] (empty: none)
  bool lowercase = false;                     // kind hf: Python's str.lower() before tokenizing
};

// The spec of a recipe's [tokenizer] section.
TokenizerSpec tokenizer_spec(const TokenizerConfig& config);

// Builds a tokenizer for `spec` from the training text (a char vocabulary, or a trained sentencepiece model), or
// loads the Hugging Face tokenizer of kind hf (the text is not used then).
// `work_dir` receives temporary files. Throws UserError for impossible specs (e.g. vocab larger than the data allows).
std::unique_ptr<Tokenizer> build_tokenizer(const TokenizerSpec& spec, const std::string& training_text,
                                           const std::string& work_dir);

// Loads what save() wrote. Throws UserError naming the file when it is missing or unreadable.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& run_dir);

// --- building blocks of the two functions above --------------------------------------------------------------

// The code points of UTF-8 `text`. Throws UserError "<what>: invalid UTF-8 at byte offset N" for malformed,
// overlong, surrogate or out-of-range sequences.
std::vector<char32_t> utf8_code_points(const std::string& text, const std::string& what);
// Byte offset of the first invalid UTF-8 sequence in `text`, or -1 when it is valid.
int64_t first_invalid_utf8(const std::string& text);

// Vocabulary = sorted unique code points of `training_text`.
std::unique_ptr<Tokenizer> make_char_tokenizer(const std::string& training_text);
// Reads tokenizer.chars as written by the char tokenizer's save().
std::unique_ptr<Tokenizer> load_char_tokenizer(const std::string& chars_path);

// Trains a sentencepiece model (kind "bpe" or "unigram") with exactly vocab_size pieces on `training_text`.
// Its temporary files go to work_dir and are removed before returning. The same text gives the same model.
std::unique_ptr<Tokenizer> train_sentencepiece(const std::string& kind, int64_t vocab_size,
                                               const std::string& training_text, const std::string& work_dir);
// Loads a sentencepiece .model; kind() is read from the model itself (bpe or unigram; other types are refused).
std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& model_path);

// Writes `bytes` as run_dir/file_name and run_dir/tokenizer.json {"kind", "vocab_size", "file"} (each written to a
// temporary name, then renamed); creates run_dir if needed.
void write_tokenizer_files(const std::string& run_dir, const std::string& kind, int64_t vocab_size,
                           const std::string& file_name, const std::string& bytes);

// The sentencepiece shim library to load: $SPREAD_SP_SHIM when set (and then only it), else
// libspread_sp_shim.so next to the running executable, in its ../lib/, or in the build directory.
// Throws UserError, saying how to build it, when there is none.
std::string find_sentencepiece_shim();
// Path of the loaded shim, loading it (once per process, with dlmopen) on first use.
std::string sentencepiece_shim_path();

}  // namespace spread
