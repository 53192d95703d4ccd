#pragma once
// The tokenizer assembled from its components (the crate's TokenizerImpl): added tokens split out, then
// normalizer, pre-tokenizer, model, truncation, post-processor and padding, and the decoder for the way back.
#include <memory>
#include <optional>
#include <string>

#include "added_vocabulary.h"
#include "decoders.h"
#include "json_fields.h"
#include "models.h"
#include "normalizers.h"
#include "post_processors.h"
#include "pre_tokenizers.h"
#include "spread/data/hf/tokenizer.h"

namespace spread::hf {

struct Truncation {
  size_t max_length = 512;
  enum class Strategy { LongestFirst, OnlyFirst, OnlySecond } strategy = Strategy::LongestFirst;
  bool left = false;  // direction Left: keep the end
};

struct Padding {
  std::optional<size_t> fixed;  // else BatchLongest
  bool left = false;
  size_t multiple_of = 0;
  int32_t pad_id = 0, pad_type_id = 0;
  std::string pad_token = "[PAD]";
};

// A tokenizer.json document (parsed) read into a tokenizer; `json_text` is kept for to_json(). `file` names the
// file in errors. truncation_and_padding false: the document's "truncation" and "padding" are left unread.
std::unique_ptr<Tokenizer> build_tokenizer(const Json& doc, std::string json_text, const std::string& file,
                                           bool truncation_and_padding = true);

}  // namespace spread::hf
