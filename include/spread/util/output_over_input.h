#pragma once
// A command's output must not be its own input.
#include <string>

namespace spread {

// UserError when `out` names the same file as `in` (the same path, a link, a hard link): the output replaces its
// name when it is complete, which would destroy the input the command read.
void refuse_output_over_input(const std::string& out, const std::string& in, const std::string& option);

}  // namespace spread
