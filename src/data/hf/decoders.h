#pragma once
// Decoders (tokenizers/src/decoders/): WordPiece, ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace,
// BPEDecoder, Sequence, chosen by the "type" of tokenizer.json's "decoder". Each maps the list of token strings
// to a new list (the crate's decode_chain); the tokenizer joins the last list.
#include <memory>
#include <string>
#include <vector>

#include "json_fields.h"

namespace spread::hf {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

std::unique_ptr<Decoder> make_decoder(const Json& j, const Where& w);

// Rust's String::from_utf8_lossy: each maximal invalid subsequence becomes one U+FFFD.
std::string utf8_lossy(std::string_view bytes);

}  // namespace spread::hf
