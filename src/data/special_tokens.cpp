#include "spread/data/special_tokens.h"

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <string_view>
#include <nlohmann/json.hpp>

#include "spread/util/error.h"
#include "spread/util/file.h"
#include "spread/util/json_depth.h"

namespace fs = std::filesystem;

namespace spread {
namespace {

// Calls f with each UTF-8 character of valid UTF-8 `text` (invalid text throws UserError, as encode does).
template <class F>
void for_each_character(const std::string& text, F&& f) {
  if (first_invalid_utf8(text) >= 0) throw user_error("", 0, "", "invalid UTF-8 in a text to encode");
  for (size_t i = 0; i < text.size();) {
    size_t n = 1;
    while (i + n < text.size() && (static_cast<unsigned char>(text[i + n]) & 0xC0) == 0x80) ++n;
    f(text.substr(i, n));
    i += n;
  }
}

class SpecialTokenizer : public Tokenizer {
 public:
  SpecialTokenizer(std::unique_ptr<Tokenizer> base, int count) : base_(std::move(base)), count_(count) {
    const auto v = int32_t(base_->vocab_size());
    ids_ = {v, v + 1, v + 2, v + 3};
    if (count == 6) ids_.query = v + 4, ids_.document = v + 5;
  }
  // A char vocabulary has no unknown id, and an encoder must embed any text (evaluation and `spread encode` read
  // texts the tokenizer never saw): characters outside the vocabulary are left out. Sentencepiece models trained
  // here never fail (byte fallback).
  std::vector<int32_t> encode(const std::string& text) const override {
    try {
      return base_->encode(text);
    } catch (const UserError&) {
      std::vector<int32_t> ids;
      for_each_character(text, [&](const std::string& character) {
        try {
          for (int32_t id : base_->encode(character)) ids.push_back(id);
        } catch (const UserError&) {
        }
      });
      return ids;
    }
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    // Runs of base ids go through the base decoder; a reserved id reads as its name.
    std::string out;
    std::vector<int32_t> run;
    auto flush = [&] {
      if (!run.empty()) out += base_->decode(run);
      run.clear();
    };
    for (int32_t id : ids) {
      if (id >= ids_.pad && id < ids_.pad + count_) {
        flush();
        out += kSpecialTokenNames[size_t(id - ids_.pad)];
      } else {
        run.push_back(id);
      }
    }
    flush();
    return out;
  }
  int64_t vocab_size() const override { return base_->vocab_size() + count_; }
  std::string kind() const override { return base_->kind(); }
  int32_t bos_id() const override { return base_->bos_id(); }
  int32_t eos_id() const override { return base_->eos_id(); }
  SpecialIds special_ids() const override { return ids_; }
  void save(const std::string& run_dir) const override {
    base_->save(run_dir);
    const fs::path meta_path = fs::path(run_dir) / "tokenizer.json";
    auto bytes = read_whole_file(meta_path.string());
    if (!bytes) throw user_error(meta_path.string(), 0, "", "cannot read the tokenizer description just written");
    refuse_deep_json(*bytes, meta_path.string());
    nlohmann::json meta = nlohmann::json::parse(*bytes);
    nlohmann::json names;
    for (int i = 0; i < count_; ++i) names[kSpecialTokenNames[size_t(i)]] = ids_.pad + i;
    meta["special_tokens"] = names;
    const std::string tmp = meta_path.string() + ".tmp";
    std::ofstream(tmp, std::ios::binary | std::ios::trunc) << meta.dump(2) << "\n";
    fs::rename(tmp, meta_path);
  }

 private:
  std::unique_ptr<Tokenizer> base_;
  int count_;
  SpecialIds ids_;
};

}  // namespace

std::unique_ptr<Tokenizer> with_special_tokens(std::unique_ptr<Tokenizer> base, int count) {
  if (count != 4 && count != 6) throw std::invalid_argument("with_special_tokens: count must be 4 or 6");
  if (base->special_ids().present()) return base;
  return std::make_unique<SpecialTokenizer>(std::move(base), count);
}

namespace {

// Ids past the limit that a prefix must give, so that a word cut at its end is not among those kept.
constexpr size_t kPrefixMarginIds = 16;
// Bytes of the first prefix per id wanted: well above the bytes per token of any tokenizer here (char: 1-4).
constexpr size_t kPrefixBytesPerId = 16;

// `text` cut to at most `bytes`, at its last whitespace in the second half of that (else at a character boundary,
// so that a text with one early space is not read whole).
std::string_view cut_at_whitespace(std::string_view text, size_t bytes) {
  if (bytes >= text.size()) return text;
  const size_t space = text.find_last_of(" \t\r\n", bytes);
  if (space != std::string_view::npos && space > bytes / 2) return text.substr(0, space);
  while (bytes > 0 && (static_cast<unsigned char>(text[bytes]) & 0xC0) == 0x80) --bytes;  // a continuation byte
  return text.substr(0, bytes);
}

// The first `max_ids` ids of tokenizer.encode(text), from a prefix of the text, so that a 10 MB line costs the
// memory of what is kept (tokenizing all of it took 1.6 GB in sentencepiece): a prefix cut at whitespace, twice as
// long each time until its ids are at least max_ids plus a margin (or it is the whole text). The tokenizers here
// split at whitespace before they merge (sentencepiece's split_by_whitespace, the pre-tokenizers of BERT and
// GPT-2), so the ids before the cut are those of the whole text; the margin keeps the last word, which a cut
// without whitespace may split, out of the result.
std::vector<int32_t> encode_prefix(const Tokenizer& tokenizer, const std::string& text, size_t max_ids) {
  const size_t wanted = max_ids + kPrefixMarginIds;
  for (size_t bytes = std::max<size_t>(wanted * kPrefixBytesPerId, 4096);; bytes *= 2) {
    const std::string_view prefix = cut_at_whitespace(text, bytes);
    std::vector<int32_t> ids = tokenizer.encode(std::string(prefix));
    if (prefix.size() == text.size() || ids.size() >= wanted) {
      if (ids.size() > max_ids) ids.resize(max_ids);
      return ids;
    }
  }
}

}  // namespace

std::vector<int32_t> encode_for_encoder(const Tokenizer& tokenizer, const std::string& text, int64_t max_length,
                                        int32_t marker) {
  const SpecialIds s = tokenizer.special_ids();
  const int64_t frame = !s.present() ? 0 : marker >= 0 ? 3 : 2;
  std::vector<int32_t> ids = encode_prefix(tokenizer, text, size_t(std::max<int64_t>(max_length - frame, 0)));
  if (!s.present()) return ids;
  if (marker >= 0) ids.insert(ids.begin(), marker);
  ids.insert(ids.begin(), s.cls);
  ids.push_back(s.sep);
  return ids;
}

}  // namespace spread
