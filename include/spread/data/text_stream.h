#pragma once
// Text of sampled ids as they arrive, for printing while a model generates. Tokenizers decode sequences, not
// single ids: sentencepiece drops the leading space of a sequence's first piece, and byte-fallback pieces make a
// character only together (an incomplete one decodes as U+FFFD). So each id is decoded together with the ids
// before it in a short window that starts at an already printed id, and text ending in U+FFFD is held back until
// the character completes. Promise: the prompt's decode followed by every push() and finish() equals the decode
// of prompt and sampled ids together.
#include <cstdint>
#include <string>
#include <vector>

#include "spread/data/tokenizer.h"

namespace spread {

class TextStream {
 public:
  // `prompt`: the ids whose text is already shown (may be empty), ending on a whole character as encoded text
  // does. The tokenizer must outlive the stream.
  TextStream(const Tokenizer& tokenizer, const std::vector<int32_t>& prompt);
  // The text that became final with `id` (empty while a character is incomplete).
  std::string push(int32_t id);
  // The text still held back (an incomplete character at the very end).
  std::string finish();

 private:
  const Tokenizer& tokenizer_;
  std::vector<int32_t> window_;  // decoded together; window_[0], when it is from the prompt, is already shown
  size_t shown_ = 0;             // bytes of decode(window_) handed out so far
};

}  // namespace spread
