#pragma once
// JSON text from a file spread did not write (a model folder's config.json, a safetensors header), parsed with the
// parser's own account of what is wrong. NaN, Infinity and 1e999 are not JSON, although Python's json module
// writes and reads them: they are refused with the line and column, not as "not a JSON object".
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace spread {

// `text` parsed, after refuse_deep_json. Malformed text is a UserError naming `file` with the parser's line and
// column and a hint; the value may be of any JSON type.
nlohmann::json parse_json_text(std::string_view text, const std::string& file);

}  // namespace spread
