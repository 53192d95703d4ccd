// WordPiece (tokenizers/src/models/wordpiece/mod.rs): greedy longest match from the left, "##" (the
// continuing_subword_prefix) before every piece but the first; a word longer than max_input_chars_per_word
// characters, or with any part that matches nothing, is one unk token over the whole word. The search for the
// longest piece starts at the longest vocabulary entry's length rather than the word's end (same result, since
// nothing longer can match).
#include "models.h"

#include "spread/util/error.h"

namespace spread::hf {

void Model::read_vocab(const Json& vocab, const Where& w) {
  if (!vocab.is_object()) w.fail("expected an object of token: id");
  tokens_.assign(vocab.size(), {});
  has_.assign(vocab.size(), 0);
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer()) w.fail("token '" + it.key() + "' has a non-integer id " + it.value().dump());
    // Compared as given: an unsigned id past int64's range must not wrap to a negative one.
    const bool in_range = it.value().is_number_unsigned()
                              ? it.value().get<uint64_t>() < vocab.size()
                              : it.value().get<int64_t>() >= 0 && it.value().get<int64_t>() < int64_t(vocab.size());
    if (!in_range)
      w.fail("token '" + it.key() + "' has id " + it.value().dump() + ", out of range for " +
             std::to_string(vocab.size()) + " entries (ids must be 0.." + std::to_string(vocab.size() - 1) + ")");
    const int64_t id = it.value().get<int64_t>();
    if (has_[id]) w.fail("id " + std::to_string(id) + " is given to both '" + tokens_[id] + "' and '" + it.key() + "'");
    vocab_.insert(it.key(), static_cast<int32_t>(id));
    tokens_[id] = it.key();
    has_[id] = 1;
  }
}

namespace {

class WordPiece : public Model {
 public:
  WordPiece(const Json& j, const Where& w) {
    read_vocab(field(j, "vocab", w), w.at("vocab"));
    unk_ = get_string(j, "unk_token", "[UNK]", w);
    unk_at_ = w.at("unk_token");
    prefix_ = get_string(j, "continuing_subword_prefix", "##", w);
    max_chars_ = get_count(j, "max_input_chars_per_word", 100, INT32_MAX, w);
    unk_id_ = vocab_.find(unk_);
    for (const auto& t : tokens_) max_len_ = std::max(max_len_, t.size());
  }

  void tokenize(std::string_view word, std::vector<Token>& out) const override {
    const size_t first = out.size();
    if (count_chars(word) > max_chars_) return push_unk(word, out);
    std::string piece;
    size_t start = 0;
    while (start < word.size()) {
      size_t end = std::min(word.size(), start + max_len_);
      while (end > start && end < word.size() && (static_cast<unsigned char>(word[end]) & 0xC0) == 0x80) --end;
      int32_t id = -1;
      while (end > start) {
        piece.clear();
        if (start > 0) piece += prefix_;
        piece.append(word.substr(start, end - start));
        id = vocab_.find(piece);
        if (id >= 0) break;
        --end;
        while (end > start && (static_cast<unsigned char>(word[end]) & 0xC0) == 0x80) --end;
      }
      if (id < 0) {
        out.resize(first);
        return push_unk(word, out);
      }
      out.push_back(Token{id, piece, static_cast<uint32_t>(start), static_cast<uint32_t>(end)});
      start = end;
    }
  }

 private:
  static int64_t count_chars(std::string_view s) {
    int64_t n = 0;
    for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    return n;
  }
  void push_unk(std::string_view word, std::vector<Token>& out) const {
    if (unk_id_ < 0) unk_at_.fail(missing_unk_problem(unk_), kMissingUnkFix);
    out.push_back(Token{unk_id_, unk_, 0, static_cast<uint32_t>(word.size())});
  }
  std::string unk_, prefix_;
  Where unk_at_;  // the file and key an unknown word's error names: the tokenizer's, not the text's
  int64_t max_chars_ = 100;
  int32_t unk_id_ = -1;
  size_t max_len_ = 0;
};

}  // namespace

std::unique_ptr<Model> make_wordpiece(const Json& j, const Where& w) { return std::make_unique<WordPiece>(j, w); }

}  // namespace spread::hf
