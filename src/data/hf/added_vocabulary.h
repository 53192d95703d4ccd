#pragma once
// Added tokens (tokenizers/src/tokenizer/added_vocabulary.rs): tokens matched in the text before the model runs.
// Tokens with normalized = false (all special tokens in practice) are found in the raw text; the others in the
// normalized text of what is between them, their content normalized first. Matching is leftmost-longest (the
// crate's aho-corasick); single_word keeps a match only with no word character on either side; lstrip/rstrip
// widen it over the whitespace before/after.
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "json_fields.h"
#include "normalized.h"
#include "normalizers.h"

namespace spread::hf {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
};

class AddedVocabulary {
 public:
  // `tokens` as tokenizer.json's added_tokens; `normalizer` gives the normalized tokens' patterns.
  void build(std::vector<AddedToken> tokens, const Normalizer* normalizer);
  // The whole input as pieces, added tokens already tokenized and the rest normalized.
  PreTokenized extract_and_normalize(std::string_view text, const Normalizer* normalizer) const;
  const AddedToken* by_id(int32_t id) const;
  const AddedToken* by_content(std::string_view content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  struct Matcher {
    std::vector<std::pair<std::string, size_t>> patterns;  // (text, token index), longest first
    bool first_byte[256] = {};
    void add(std::string text, size_t token);
    void finish();  // sorts the patterns, longest first
  };
  std::vector<std::pair<Range, int>> find_matches(std::string_view s, const Matcher& m) const;
  void split_with(PreTokenized& pre, const Matcher& m) const;
  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> by_id_;  // decode asks once per id
  Matcher raw_, normalized_;
};

}  // namespace spread::hf
