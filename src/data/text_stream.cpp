#include "spread/data/text_stream.h"

namespace spread {
namespace {

// A window longer than this restarts at its last id once all its text is shown, so a push decodes a few dozen
// ids instead of the whole output (which made a long generation quadratic).
constexpr size_t kWindow = 64;
constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

// The length of `text` without trailing U+FFFDs, which a later byte piece may still turn into a character.
size_t settled_length(const std::string& text) {
  size_t n = text.size();
  while (n >= 3 && text.compare(n - 3, 3, kReplacement) == 0) n -= 3;
  return n;
}

}  // namespace

TextStream::TextStream(const Tokenizer& tokenizer, const std::vector<int32_t>& prompt) : tokenizer_(tokenizer) {
  if (prompt.empty()) return;
  window_ = {prompt.back()};
  shown_ = tokenizer_.decode(window_).size();
}

std::string TextStream::push(int32_t id) {
  window_.push_back(id);
  const std::string text = tokenizer_.decode(window_);
  const size_t settled = settled_length(text);
  std::string out = settled > shown_ ? text.substr(shown_, settled - shown_) : std::string();
  shown_ = std::max(shown_, settled);
  if (window_.size() > kWindow && shown_ == text.size()) {
    window_ = {id};
    shown_ = tokenizer_.decode(window_).size();
  }
  return out;
}

std::string TextStream::finish() {
  const std::string text = tokenizer_.decode(window_);
  std::string out = text.size() > shown_ ? text.substr(shown_) : std::string();
  shown_ = text.size();
  return out;
}

}  // namespace spread
