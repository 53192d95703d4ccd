#include "spread/util/error.h"

namespace spread {

UserError user_error(const std::string& file, int line, const std::string& key, const std::string& problem,
                     const std::string& hint) {
  std::string msg = file;
  if (line > 0) msg += ":" + std::to_string(line);
  if (!msg.empty()) msg += ": ";
  if (!key.empty()) msg += "key '" + key + "': ";
  msg += problem;
  if (!hint.empty()) msg += " (" + hint + ")";
  return UserError(msg);
}

}  // namespace spread
