// The char tokenizer, UTF-8 decoding, and the factory/loader that pick a tokenizer kind.
//   char vocabulary = sorted(set(code points of the training text)), id = rank in that order,
// which for tiny shakespeare is nanoGPT's 65-character vocabulary in nanoGPT's order.
#include "spread/data/tokenizer.h"
#include "spread/data/hf_run_tokenizer.h"
#include "spread/data/special_tokens.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "spread/util/error.h"
#include "spread/util/file.h"
#include "spread/util/json_depth.h"

namespace spread {
namespace fs = std::filesystem;

namespace {

bool is_continuation(unsigned char b) { return (b & 0xC0) == 0x80; }

// Decodes one UTF-8 sequence at p (avail > 0 bytes); returns its length, or 0 when it is invalid
// (truncated, overlong, a surrogate, or above U+10FFFF).
int decode_one(const unsigned char* p, size_t avail, char32_t* cp) {
  const unsigned char b0 = p[0];
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  }
  int len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    if (b0 == 0xE0) lo = 0xA0;  // overlong
    if (b0 == 0xED) hi = 0x9F;  // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    if (b0 == 0xF0) lo = 0x90;  // overlong
    if (b0 == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (avail < static_cast<size_t>(len) || p[1] < lo || p[1] > hi) return 0;
  char32_t value = b0 & (0x7F >> len);
  for (int i = 1; i < len; ++i) {
    if (!is_continuation(p[i])) return 0;
    value = (value << 6) | (p[i] & 0x3F);
  }
  *cp = value;
  return len;
}

void append_utf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

UserError invalid_utf8(const std::string& what, size_t offset) {
  return user_error(what, 0, "", fmt::format("invalid UTF-8 at byte offset {}", offset),
                    "tokenizers read UTF-8 text; re-encode the file as UTF-8");
}

// Calls visit(code_point, byte_offset) for each character of text; throws on invalid UTF-8.
template <typename Visit>
void for_each_code_point(const std::string& text, const std::string& what, Visit&& visit) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  size_t i = 0;
  while (i < text.size()) {
    char32_t cp = 0;
    const int len = decode_one(p + i, text.size() - i, &cp);
    if (len == 0) throw invalid_utf8(what, i);
    visit(cp, i);
    i += static_cast<size_t>(len);
  }
}

// "'a' (U+0061)", or just "U+000A" for characters that would not print.
std::string describe(char32_t cp) {
  const std::string code = fmt::format("U+{:04X}", static_cast<uint32_t>(cp));
  if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0)) return code;
  std::string glyph;
  append_utf8(cp, &glyph);
  return "'" + glyph + "' (" + code + ")";
}

std::string read_file(const std::string& path) {
  auto bytes = read_whole_file(path);
  if (!bytes) throw user_error(path, 0, "", "cannot read the tokenizer file", "is the run directory complete?");
  return *bytes;
}

nlohmann::json parse_json(const std::string& path) {
  try {
    const std::string text = read_file(path);
    refuse_deep_json(text, path);
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw user_error(path, 0, "", std::string("not valid JSON: ") + e.what());
  }
}

class CharTokenizer final : public Tokenizer {
 public:
  explicit CharTokenizer(std::vector<char32_t> chars) : chars_(std::move(chars)) {
    ids_.assign(static_cast<size_t>(chars_.back()) + 1, -1);
    for (size_t id = 0; id < chars_.size(); ++id) ids_[chars_[id]] = static_cast<int32_t>(id);
  }

  std::vector<int32_t> encode(const std::string& text) const override {
    std::vector<int32_t> out;
    out.reserve(text.size());
    for_each_code_point(text, "text to encode", [&](char32_t cp, size_t offset) {
      const int32_t id = cp < ids_.size() ? ids_[cp] : -1;
      if (id < 0)
        throw user_error("", 0, "", fmt::format("character {} at byte offset {} is not in the char vocabulary",
                                                describe(cp), offset),
                         "the char vocabulary is the set of characters of the training data");
      out.push_back(id);
    });
    return out;
  }

  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string out;
    out.reserve(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] >= vocab_size())
        throw user_error("", 0, "", fmt::format("id {} at position {} is outside the char vocabulary [0, {})",
                                                ids[i], i, vocab_size()));
      append_utf8(chars_[ids[i]], &out);
    }
    return out;
  }

  int64_t vocab_size() const override { return static_cast<int64_t>(chars_.size()); }
  std::string kind() const override { return "char"; }

  // tokenizer.chars: {"kind": "char", "code_points": [10, 32, ...]} — numbers, so that no character (newline,
  // quote, invalid-looking control) needs escaping and the file reads the same in any JSON library.
  void save(const std::string& run_dir) const override {
    const nlohmann::json doc = {{"kind", "char"}, {"code_points", std::vector<uint32_t>(chars_.begin(), chars_.end())}};
    write_tokenizer_files(run_dir, "char", vocab_size(), "tokenizer.chars", doc.dump() + "\n");
  }

 private:
  std::vector<char32_t> chars_;  // id -> code point, increasing
  std::vector<int32_t> ids_;     // code point -> id, -1 when absent (dense up to the largest code point)
};

void check_kind(const std::string& kind, const std::string& where) {
  if (kind != "char" && kind != "bpe" && kind != "unigram" && kind != "hf")
    throw user_error(where, 0, "tokenizer.kind", "unknown tokenizer kind '" + kind + "'",
                     "use char, bpe, unigram or hf");
}

}  // namespace

int64_t first_invalid_utf8(const std::string& text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  size_t i = 0;
  char32_t cp = 0;
  while (i < text.size()) {
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    const int len = decode_one(p + i, text.size() - i, &cp);
    if (len == 0) return static_cast<int64_t>(i);
    i += static_cast<size_t>(len);
  }
  return -1;
}

std::vector<char32_t> utf8_code_points(const std::string& text, const std::string& what) {
  std::vector<char32_t> out;
  out.reserve(text.size());
  for_each_code_point(text, what, [&](char32_t cp, size_t) { out.push_back(cp); });
  return out;
}

void write_tokenizer_files(const std::string& run_dir, const std::string& kind, int64_t vocab_size,
                           const std::string& file_name, const std::string& bytes) {
  fs::create_directories(run_dir);
  const nlohmann::json meta = {{"kind", kind}, {"vocab_size", vocab_size}, {"file", file_name}};
  const std::pair<std::string, std::string> files[] = {{file_name, bytes}, {"tokenizer.json", meta.dump(2) + "\n"}};
  for (const auto& [name, content] : files) {
    // Write then rename, so a crash never leaves a half-written tokenizer beside a checkpoint.
    const fs::path path = fs::path(run_dir) / name;
    const fs::path tmp = path.string() + ".tmp";
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out.write(content.data(), static_cast<std::streamsize>(content.size()));
      if (!out) throw user_error(tmp.string(), 0, "", "cannot write the tokenizer file");
    }
    fs::rename(tmp, path);
  }
}

std::unique_ptr<Tokenizer> make_char_tokenizer(const std::string& training_text) {
  std::vector<bool> seen(0x110000, false);
  for_each_code_point(training_text, "training text", [&](char32_t cp, size_t) { seen[cp] = true; });
  std::vector<char32_t> chars;
  for (char32_t cp = 0; cp < seen.size(); ++cp)
    if (seen[cp]) chars.push_back(cp);
  if (chars.empty())
    throw user_error("", 0, "", "the training text is empty, so the char vocabulary would be empty",
                     "check data.path");
  return std::make_unique<CharTokenizer>(std::move(chars));
}

std::unique_ptr<Tokenizer> load_char_tokenizer(const std::string& chars_path) {
  const nlohmann::json doc = parse_json(chars_path);
  std::vector<int64_t> values;
  try {
    if (doc.at("kind").get<std::string>() != "char") throw std::runtime_error("kind is not \"char\"");
    values = doc.at("code_points").get<std::vector<int64_t>>();
  } catch (const std::exception& e) {
    throw user_error(chars_path, 0, "", std::string("not a char tokenizer file: ") + e.what());
  }
  std::vector<char32_t> chars(values.begin(), values.end());
  for (size_t i = 0; i < values.size(); ++i) {
    const bool valid = values[i] >= 0 && values[i] < 0x110000 && !(values[i] >= 0xD800 && values[i] <= 0xDFFF);
    if (!valid || (i > 0 && chars[i] <= chars[i - 1]))
      throw user_error(chars_path, 0, "code_points",
                       "code points must be valid, unique and increasing (entry " + std::to_string(i) + ")");
  }
  if (chars.empty()) throw user_error(chars_path, 0, "code_points", "the char vocabulary is empty");
  return std::make_unique<CharTokenizer>(std::move(chars));
}

TokenizerSpec tokenizer_spec(const TokenizerConfig& t) {
  return {t.kind, t.vocab_size, t.model, t.path, t.query_marker, t.document_marker, t.lowercase};
}

std::unique_ptr<Tokenizer> build_tokenizer(const TokenizerSpec& spec, const std::string& training_text,
                                           const std::string& work_dir) {
  check_kind(spec.kind, spec.model_path);
  if (spec.kind == "hf") {
    if (spec.hf_path.empty())
      throw user_error("", 0, "tokenizer.path", "kind hf needs the Hugging Face tokenizer to use",
                       "set tokenizer.path to a tokenizer.json, vocab.txt, vocab.json or their folder");
    return load_hf_run_tokenizer(spec.hf_path, {spec.query_marker, spec.document_marker, spec.lowercase});
  }
  if (spec.kind == "char") {
    if (!spec.model_path.empty())
      throw user_error(spec.model_path, 0, "tokenizer.model", "a model file is only used by bpe and unigram",
                       "drop tokenizer.model or set tokenizer.kind to the model's type");
    return make_char_tokenizer(training_text);
  }
  if (spec.model_path.empty()) return train_sentencepiece(spec.kind, spec.vocab_size, training_text, work_dir);
  // A given model decides the vocabulary size; its type must match what the recipe says.
  auto tokenizer = load_sentencepiece(spec.model_path);
  if (tokenizer->kind() != spec.kind)
    throw user_error(spec.model_path, 0, "tokenizer.kind",
                     "the recipe says '" + spec.kind + "' but this is a " + tokenizer->kind() + " model");
  return tokenizer;
}

namespace {

// tokenizer.json's fields; empty kind and vocab_size -1 when the file is absent.
struct TokenizerMeta {
  std::string kind;
  int64_t vocab_size = -1;
  int special_tokens = 0;  // how many reserved ids it lists (data/special_tokens.h): 0, 4 or 6
  HfRunOptions hf;         // kind hf: the entries used as [Q] / [D], lower-casing
};

TokenizerMeta read_meta(const fs::path& meta_path) {
  TokenizerMeta meta;
  if (!fs::exists(meta_path)) return meta;
  const nlohmann::json doc = parse_json(meta_path.string());
  try {
    meta.kind = doc.at("kind").get<std::string>();
    meta.vocab_size = doc.at("vocab_size").get<int64_t>();
    if (doc.contains("special_tokens")) meta.special_tokens = int(doc.at("special_tokens").size());
    if (doc.contains("query_marker")) meta.hf = {doc.at("query_marker"), doc.at("document_marker")};
    meta.hf.lowercase = doc.value("lowercase", false);
  } catch (const nlohmann::json::exception& e) {
    throw user_error(meta_path.string(), 0, "", std::string("not a tokenizer description: ") + e.what());
  }
  check_kind(meta.kind, meta_path.string());
  if (meta.special_tokens != 0 && meta.special_tokens != 4 && meta.special_tokens != 6)
    throw user_error(meta_path.string(), 0, "special_tokens", fmt::format("lists {} reserved ids; spread writes 4 "
                     "([PAD] [CLS] [SEP] [MASK]) or 6 (and [Q] [D])", meta.special_tokens));
  return meta;
}

std::unique_ptr<Tokenizer> load_run_hf(const fs::path& dir, const TokenizerMeta& meta) {
  const fs::path path = dir / kHfTokenizerFile;
  if (!fs::exists(path))
    throw user_error(path.string(), 0, "", "missing (tokenizer.json says kind hf)",
                     "copy the run's tokenizer.hf.json back, or the HF tokenizer.json it was made from");
  auto tokenizer = load_hf_run_tokenizer(path.string(), meta.hf);
  if (meta.vocab_size >= 0 && meta.vocab_size != tokenizer->vocab_size())
    throw user_error((dir / "tokenizer.json").string(), 0, "vocab_size",
                     fmt::format("says {} but {} has {}", meta.vocab_size, kHfTokenizerFile, tokenizer->vocab_size()));
  return tokenizer;
}

}  // namespace

// Picks tokenizer.chars or tokenizer.model; tokenizer.json, when present, names the kind and is cross-checked.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& run_dir) {
  const fs::path dir(run_dir);
  const fs::path meta_path = dir / "tokenizer.json";
  const fs::path chars_path = dir / "tokenizer.chars";
  const fs::path model_path = dir / "tokenizer.model";
  const TokenizerMeta meta = read_meta(meta_path);
  if (meta.kind == "hf") return load_run_hf(dir, meta);
  bool use_chars = meta.kind == "char";
  if (meta.kind.empty()) {
    if (fs::exists(chars_path) == fs::exists(model_path))
      throw user_error(meta_path.string(), 0, "", "missing, and the run directory holds no single tokenizer file",
                       "a run directory holds tokenizer.json with tokenizer.chars or tokenizer.model");
    use_chars = fs::exists(chars_path);
  }
  auto tokenizer = use_chars ? load_char_tokenizer(chars_path.string()) : load_sentencepiece(model_path.string());
  if (!meta.kind.empty() && tokenizer->kind() != meta.kind)
    throw user_error(meta_path.string(), 0, "kind",
                     "says " + meta.kind + " but tokenizer.model is a " + tokenizer->kind() + " model");
  if (meta.vocab_size >= 0 && meta.vocab_size != tokenizer->vocab_size())
    throw user_error(meta_path.string(), 0, "vocab_size",
                     fmt::format("says {} but the tokenizer file has {}", meta.vocab_size, tokenizer->vocab_size()));
  return meta.special_tokens ? with_special_tokens(std::move(tokenizer), meta.special_tokens) : std::move(tokenizer);
}

}  // namespace spread
