#pragma once
// The message of the spread::UserError that a call throws, for tests of error texts.
#include <string>

#include "spread/util/error.h"

namespace spread::testing {

// The message of the UserError that `body` throws ("" when it throws none).
template <typename Body>
std::string user_error_message(Body&& body) {
  try {
    body();
  } catch (const spread::UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace spread::testing
