#include "spread/util/json_text.h"

#include <string>

#include "spread/util/error.h"
#include "spread/util/json_depth.h"

namespace spread {
namespace {

// nlohmann's messages quote the token the error stopped in ("...; last read: 'TOKEN'[; expected ...]"), which for an
// unterminated string is the rest of the file: from a link to someone else's file, its bytes. A few bytes say where
// the fault is; the line and column say the rest.
std::string with_short_token(std::string why) {
  constexpr size_t kShown = 40;
  const std::string opening = "; last read: '";
  const size_t begin = why.find(opening);
  if (begin == std::string::npos) return why;
  const size_t token = begin + opening.size();
  size_t end = why.rfind("'; expected ");
  if (end == std::string::npos || end < token) end = why.size() - 1;
  if (end <= token || end - token <= kShown) return why;
  size_t cut = token + kShown;
  while (cut > token && (static_cast<unsigned char>(why[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 character
  return why.replace(cut, end - cut, "... (" + std::to_string(end - token) + " bytes)");
}

}  // namespace

nlohmann::json parse_json_text(std::string_view text, const std::string& file) {
  refuse_deep_json(text, file);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    // what() starts "[json.exception.parse_error.101] "; the rest says where and why.
    std::string why = e.what();
    const auto bracket = why.find("] ");
    if (why.rfind("[json.exception.", 0) == 0 && bracket != std::string::npos) why.erase(0, bracket + 2);
    throw user_error(file, 0, "", "is not valid JSON (" + with_short_token(why) + ")",
                     "save it as strict JSON: NaN, Infinity and numbers beyond 1.8e308 have no JSON form");
  }
}

}  // namespace spread
