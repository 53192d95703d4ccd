#pragma once
// Whole-file reads, and the filesystem changes spread makes, with failures as UserErrors naming the path (exit 2)
// instead of an uncaught std::filesystem_error (abort): a directory under a file, a read-only mount, a name too
// long, a full disk. Readers raise their own error when a file is unreadable, since only they know which key or
// file the user should fix.
#include <filesystem>
#include <optional>
#include <string>

#include "spread/util/error.h"

namespace spread {

// The file's bytes, or nullopt when it cannot be opened.
std::optional<std::string> read_whole_file(const std::string& path);

void make_directories(const std::string& path);
void remove_file(const std::string& path);  // a missing file is no error
void rename_file(const std::string& from, const std::string& to);

// "PATH: cannot DOING: REASON (HINT)", the hint chosen by the error (file in the way, read-only, name too long...).
UserError filesystem_user_error(const std::string& path, const std::string& doing, const std::error_code& ec);
UserError filesystem_user_error(const std::filesystem::filesystem_error& e);

}  // namespace spread
