#pragma once
// One exception type for bad user input (recipes, data files, checkpoints, CLI arguments).
// main() prints its message as one line and exits with code 2; nothing else turns it into a crash.
#include <stdexcept>
#include <string>

namespace spread {

class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& message) : std::runtime_error(message) {}
};

// "FILE:LINE: key 'KEY': PROBLEM (HINT)". Pass line = 0 when there is no line, an empty key when there is no key.
UserError user_error(const std::string& file, int line, const std::string& key, const std::string& problem,
                     const std::string& hint = "");

}  // namespace spread
