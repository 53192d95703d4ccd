#pragma once
// Pre-tokenizers (tokenizers/src/pre_tokenizers/): BertPreTokenizer, ByteLevel, Whitespace, WhitespaceSplit,
// Punctuation, Digits, Metaspace, Split, Sequence, chosen by the "type" of tokenizer.json's "pre_tokenizer".
#include <memory>

#include "json_fields.h"
#include "normalized.h"

namespace spread::hf {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual void pre_tokenize(PreTokenized& pre) const = 0;
};

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& j, const Where& w);

// GPT-2's byte-to-character map (bytes_to_unicode): printable Latin-1 bytes stand for themselves, the others
// for U+0100 onwards, so every byte is one visible character.
const std::string& byte_char(unsigned char b);  // its UTF-8
int char_byte(char32_t c);                      // the byte a character stands for, -1 for none

}  // namespace spread::hf
