#pragma once
// Models (tokenizers/src/models/): WordPiece and BPE, chosen by the "type" of tokenizer.json's "model". A model
// turns one pre-token into tokens whose offsets are bytes of that pre-token.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "json_fields.h"
#include "normalized.h"
#include "vocab.h"

namespace spread::hf {

class Model {
 public:
  virtual ~Model() = default;
  virtual void tokenize(std::string_view word, std::vector<Token>& out) const = 0;
  int32_t token_to_id(std::string_view token) const { return vocab_.find(token); }
  const std::string* id_to_token(int32_t id) const {
    return id >= 0 && id < static_cast<int32_t>(tokens_.size()) && has_[id] ? &tokens_[id] : nullptr;
  }
  // The crate's get_vocab_size(): the number of entries.
  int64_t vocab_size() const { return static_cast<int64_t>(vocab_.size()); }

 protected:
  // Reads {"token": id, ...}; UserError for duplicate ids, or ids negative or not below the entry count
  // (the crate's vocab_r would miss a token, and decode would fail on it).
  void read_vocab(const Json& vocab, const Where& w);
  VocabMap vocab_;
  std::vector<std::string> tokens_;  // by id
  std::vector<uint8_t> has_;
};

std::unique_ptr<Model> make_model(const Json& j, const Where& w);

}  // namespace spread::hf
