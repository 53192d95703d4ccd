#pragma once
// Whole-file reads. Callers raise their own error when the file is unreadable, since only they know which
// key or file the user should fix.
#include <optional>
#include <string>

namespace spread {

// The file's bytes, or nullopt when it cannot be opened.
std::optional<std::string> read_whole_file(const std::string& path);

}  // namespace spread
