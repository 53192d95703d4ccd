#include "spread/util/json_depth.h"

#include "spread/util/error.h"

namespace spread {

bool json_too_deep(std::string_view text) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

void refuse_deep_json(std::string_view text, const std::string& file, int line) {
  if (json_too_deep(text))
    throw user_error(file, line, "", "JSON nested more than " + std::to_string(kMaxJsonDepth) + " levels deep",
                     "no model, tokenizer or data file needs that many; the file is damaged or not what it claims");
}

}  // namespace spread
