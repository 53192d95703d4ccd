// Tokenizer::load: the three layouts a model folder can hold, each read into the tokenizer.json form.
//   tokenizer.json             as written by `tokenizers`
//   vocab.txt                  BERT: BertNormalizer (lowercase from tokenizer_config.json's do_lower_case, else
//                              true) + BertPreTokenizer + WordPiece + "[CLS] $A [SEP]", as transformers'
//                              BertTokenizerFast.from_pretrained gives (transformers 5.3)
//   vocab.json + merges.txt    GPT-2: ByteLevel pre-tokenizer (no prefix space) + BPE + ByteLevel decoder, a
//                              template of the sequence alone, <|endoftext|> special, as GPT2TokenizerFast does
// A Git LFS pointer in place of a file is named as such (the file was never downloaded).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "pipeline.h"
#include "spread/util/error.h"
#include "spread/util/file.h"
#include "spread/util/json_depth.h"
#include "unicode.h"

namespace spread::hf {
namespace {

namespace fs = std::filesystem;

// Limits of this reader (docs/untrusted_input.md): each file (tokenizer.json, tokenizer_config.json, vocab.txt,
// vocab.json, merges.txt) is a regular file of at most this many bytes, and its JSON is nested at most
// kMaxJsonDepth deep. The largest tokenizer.json of a public model we know (Gemma 3's) is 33 MB.
constexpr uint64_t kMaxTokenizerFileBytes = uint64_t(256) << 20;

std::string read_file(const std::string& path) {
  std::optional<std::string> bytes = read_regular_file(path, kMaxTokenizerFileBytes);
  if (!bytes) throw user_error(path, 0, "", "cannot read the file");
  std::string s = std::move(*bytes);
  if (s.rfind("version https://git-lfs", 0) == 0)
    throw user_error(path, 0, "", "is a Git LFS pointer, not the file: it was never downloaded",
                     "run `git lfs pull` in its repository, or download the file itself");
  return s;
}

Json parse_json(const std::string& text, const std::string& path) {
  refuse_deep_json(text, path);
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    throw user_error(path, 0, "", "is not valid JSON (at byte " + std::to_string(e.byte) + ")");
  }
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  size_t at = 0;
  while (at < text.size()) {
    size_t nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    std::string line = text.substr(at, nl - at);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
    at = nl + 1;
  }
  return lines;
}

Json added_token(int32_t id, const std::string& content) {
  return {{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
          {"normalized", false}, {"special", true}};
}

Json bert_from_vocab_txt(const std::string& path) {
  const std::string text = read_file(path);
  if (const int64_t bad = first_invalid_utf8(text); bad >= 0)
    throw user_error(path, 0, "", "is not UTF-8 (byte offset " + std::to_string(bad) + ")");
  Json vocab = Json::object();
  const auto lines = lines_of(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    // As the crate's WordPiece::read_file: the line without trailing whitespace.
    std::string t = lines[i];
    while (!t.empty() && (t.back() == ' ' || t.back() == '\t' || t.back() == '\r')) t.pop_back();
    if (vocab.contains(t))
      throw user_error(path, static_cast<int>(i + 1), "", "duplicate token '" + t + "' (first on line " +
                                                              std::to_string(vocab[t].get<int>() + 1) + ")");
    vocab[t] = static_cast<int>(i);
  }
  bool lower = true, chinese = true;
  Json strip = nullptr;
  const fs::path config = fs::path(path).parent_path() / "tokenizer_config.json";
  if (fs::exists(config)) {
    const Json c = parse_json(read_file(config.string()), config.string());
    const Where w{config.string(), ""};
    lower = get_bool(c, "do_lower_case", true, w);
    chinese = get_bool(c, "tokenize_chinese_chars", true, w);
    if (c.contains("strip_accents") && c["strip_accents"].is_boolean()) strip = c["strip_accents"];
  }
  Json added = Json::array();
  for (const char* s : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"})
    if (vocab.contains(s)) added.push_back(added_token(vocab[s].get<int>(), s));
  for (const char* s : {"[UNK]", "[CLS]", "[SEP]"})
    if (!vocab.contains(s)) throw user_error(path, 0, "", std::string("has no ") + s + " token", "is this a BERT vocab.txt?");
  auto special = [&](const char* s, int type) { return Json{{"SpecialToken", {{"id", s}, {"type_id", type}}}}; };
  auto seq = [&](const char* s, int type) { return Json{{"Sequence", {{"id", s}, {"type_id", type}}}}; };
  return {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", {{"type", "BertNormalizer"}, {"clean_text", true}, {"handle_chinese_chars", chinese},
                      {"strip_accents", strip}, {"lowercase", lower}}},
      {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", {special("[CLS]", 0), seq("A", 0), special("[SEP]", 0)}},
        {"pair", {special("[CLS]", 0), seq("A", 0), special("[SEP]", 0), seq("B", 1), special("[SEP]", 1)}},
        {"special_tokens",
         {{"[CLS]", {{"id", "[CLS]"}, {"ids", {vocab["[CLS]"]}}, {"tokens", {"[CLS]"}}}},
          {"[SEP]", {{"id", "[SEP]"}, {"ids", {vocab["[SEP]"]}}, {"tokens", {"[SEP]"}}}}}}}},
      {"decoder", {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}},
      {"model", {{"type", "WordPiece"}, {"unk_token", "[UNK]"}, {"continuing_subword_prefix", "##"},
                 {"max_input_chars_per_word", 100}, {"vocab", vocab}}}};
}

Json gpt2_from_vocab_merges(const std::string& vocab_path, const std::string& merges_path) {
  Json vocab = parse_json(read_file(vocab_path), vocab_path);
  if (!vocab.is_object()) throw user_error(vocab_path, 0, "", "expected a JSON object of token: id");
  for (const auto& item : vocab.items())
    if (!item.value().is_number_integer())
      throw user_error(vocab_path, 0, item.key(), "has the id " + item.value().dump() + ", not an integer");
  const std::string text = read_file(merges_path);
  Json merges = Json::array();
  const auto lines = lines_of(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (line.rfind("#version", 0) == 0) continue;
    if (line.empty() && i + 1 == lines.size()) continue;
    const size_t sp = line.find(' ');
    if (line.empty() || sp == std::string::npos || line.find(' ', sp + 1) != std::string::npos || sp == 0 ||
        sp + 1 == line.size())
      throw user_error(merges_path, static_cast<int>(i + 1), "",
                       "expected two tokens separated by one space, got '" + line + "'");
    merges.push_back(Json::array({line.substr(0, sp), line.substr(sp + 1)}));
  }
  Json added = Json::array();
  const char* eot = "<|endoftext|>";
  if (vocab.contains(eot)) added.push_back(added_token(vocab[eot].get<int>(), eot));
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
          {"post_processor", {{"type", "TemplateProcessing"},
                              {"single", {{{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
                              {"pair", {{{"Sequence", {{"id", "A"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
                              {"special_tokens", Json::object()}}},
          {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
          {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", ""},
                     {"end_of_word_suffix", ""}, {"fuse_unk", false}, {"byte_fallback", false},
                     {"ignore_merges", false}, {"vocab", vocab}, {"merges", merges}}}};
}

// Where errors about a converted layout point: the files it came from.
std::unique_ptr<Tokenizer> from_document(const Json& doc, const std::string& file) {
  return build_tokenizer(doc, doc.dump(), file);
}

std::unique_ptr<Tokenizer> load_file(const std::string& path, bool truncation_and_padding) {
  const fs::path p(path);
  if (p.extension() == ".txt") return from_document(bert_from_vocab_txt(path), path);
  if (p.filename() == "vocab.json") {
    const fs::path merges = p.parent_path() / "merges.txt";
    if (!fs::exists(merges)) throw user_error(path, 0, "", "has no merges.txt beside it", "a GPT-2 folder holds vocab.json and merges.txt");
    return from_document(gpt2_from_vocab_merges(path, merges.string()), path);
  }
  std::string text = read_file(path);
  const Json doc = parse_json(text, path);
  return build_tokenizer(doc, std::move(text), path, truncation_and_padding);
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string& path, bool truncation_and_padding) {
  if (!fs::exists(path)) throw user_error(path, 0, "", "no such file or folder", "give a tokenizer.json, a vocab.txt, a vocab.json or a folder holding one");
  if (fs::is_directory(path)) {
    const fs::path dir(path);
    for (const char* file : {"tokenizer.json", "vocab.txt", "vocab.json"})
      if (fs::exists(dir / file)) return load((dir / file).string(), truncation_and_padding);
    throw user_error(path, 0, "", "holds no tokenizer.json, vocab.txt or vocab.json + merges.txt");
  }
  // A value that a component reads without the typed accessors of json_fields.h, where the file holds another type,
  // is nlohmann's exception: the file's problem all the same, never an abort.
  try {
    return load_file(path, truncation_and_padding);
  } catch (const nlohmann::json::exception& e) {
    throw user_error(path, 0, "", std::string("holds a value of an unexpected type: ") + e.what(),
                     "check the file against the format `tokenizers` writes");
  }
}

std::unique_ptr<Tokenizer> add_tokens(std::unique_ptr<Tokenizer> base, const std::vector<std::string>& tokens,
                                      const std::string& file, bool truncation_and_padding) {
  Json doc = parse_json(base->to_json(), file);
  if (!doc.contains("added_tokens") || doc["added_tokens"].is_null()) doc["added_tokens"] = Json::array();
  Json& added = doc["added_tokens"];
  if (!added.is_array()) throw user_error(file, 0, "added_tokens", "is not a list");
  std::vector<std::string> listed;
  for (const auto& t : added)
    if (t.is_object() && t.contains("content") && t["content"].is_string()) listed.push_back(t["content"]);
  bool changed = false;
  for (const auto& token : tokens) {
    if (token.empty() || std::find(listed.begin(), listed.end(), token) != listed.end()) continue;
    listed.push_back(token);
    added.push_back({{"content", token}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                     {"normalized", true}, {"special", false}});
    changed = true;
  }
  if (!changed) return base;
  // The reader gives each entry without an id the crate's id; the saved text then carries it, as the crate's does.
  const auto numbered = build_tokenizer(doc, "", file, truncation_and_padding);
  for (auto& t : added)
    if (!t.contains("id")) t["id"] = *numbered->token_to_id(t["content"].get<std::string>());
  std::string text = doc.dump(2);
  return build_tokenizer(doc, std::move(text), file, truncation_and_padding);
}

// The binding converts offsets to characters before the post-processor trims them (ByteLevel's trim_offsets
// counts characters); trimming in bytes can leave a range inside a character (a prefix space sharing a
// three-byte character's range, a space normalized from U+00A0). Rounding a start up and an end down to
// character boundaries gives the binding's numbers for those (a start past the character, an end before it).
std::vector<std::pair<int64_t, int64_t>> char_offsets(const Encoding& enc, std::string_view text) {
  // starts[b]: characters starting before byte b.
  std::vector<int64_t> starts(text.size() + 1, 0);
  for (size_t i = 0; i < text.size(); ++i)
    starts[i + 1] = starts[i] + ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80);
  const auto n = static_cast<int64_t>(text.size());
  auto start_char = [&](int64_t b) { return starts[std::clamp<int64_t>(b, 0, n)]; };
  auto end_char = [&](int64_t e) {
    e = std::clamp<int64_t>(e, 0, n);
    const bool boundary = e == n || (static_cast<unsigned char>(text[e]) & 0xC0) != 0x80;
    return boundary ? starts[e] : starts[e] - 1;
  };
  std::vector<std::pair<int64_t, int64_t>> out;
  out.reserve(enc.offsets.size());
  for (const auto& [b, e] : enc.offsets) {
    if (b >= e) {
      out.push_back({start_char(b), start_char(b)});
      continue;
    }
    out.push_back({start_char(b), std::max(start_char(b), end_char(e))});
  }
  return out;
}

}  // namespace spread::hf
