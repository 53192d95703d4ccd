#include "spread/util/json_text.h"

#include "spread/util/error.h"
#include "spread/util/json_depth.h"

namespace spread {

nlohmann::json parse_json_text(std::string_view text, const std::string& file) {
  refuse_deep_json(text, file);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    // what() starts "[json.exception.parse_error.101] "; the rest says where and why.
    std::string why = e.what();
    const auto bracket = why.find("] ");
    if (why.rfind("[json.exception.", 0) == 0 && bracket != std::string::npos) why.erase(0, bracket + 2);
    throw user_error(file, 0, "", "is not valid JSON (" + why + ")",
                     "save it as strict JSON: NaN, Infinity and numbers beyond 1.8e308 have no JSON form");
  }
}

}  // namespace spread
