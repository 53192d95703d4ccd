#include "spread/util/output_over_input.h"

#include <filesystem>

#include "spread/util/error.h"

namespace spread {

void refuse_output_over_input(const std::string& out, const std::string& in, const std::string& option) {
  std::error_code ec;
  if (out.empty() || !std::filesystem::equivalent(out, in, ec) || ec) return;
  throw user_error(out, 0, option, "is the input file (" + in + ")",
                   "write to another file: the output replaces its name when it is complete");
}

}  // namespace spread
