#include "spread/util/file.h"

#include <cerrno>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;

namespace spread {
namespace {

std::string hint_for(const std::error_code& ec) {
  switch (ec.value()) {
    case ENOTDIR:
    case EEXIST: return "a file stands where a directory is needed: move it, or choose another path";
    case EACCES:
    case EPERM:
    case EROFS: return "choose a writable location";
    case ENAMETOOLONG: return "use a shorter name (at most 255 bytes per path component)";
    case ENOSPC:
    case EDQUOT: return "free disk space";
    default: return "";
  }
}

}  // namespace

std::optional<std::string> read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

UserError filesystem_user_error(const std::string& path, const std::string& doing, const std::error_code& ec) {
  return user_error(path, 0, "", "cannot " + doing + ": " + ec.message(), hint_for(ec));
}

UserError filesystem_user_error(const fs::filesystem_error& e) {
  const std::string path = e.path1().empty() ? std::string("(filesystem)") : e.path1().string();
  return filesystem_user_error(path, "access it", e.code());
}

void make_directories(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  // create_directories reports an existing file at `path` as success on some libstdc++ versions.
  if (!ec && !fs::is_directory(path, ec)) ec = std::make_error_code(std::errc::not_a_directory);
  if (ec) throw filesystem_user_error(path, "create the directory", ec);
}

void remove_file(const std::string& path) {
  std::error_code ec;
  fs::remove(path, ec);
  if (ec) throw filesystem_user_error(path, "remove the file", ec);
}

void rename_file(const std::string& from, const std::string& to) {
  std::error_code ec;
  fs::rename(from, to, ec);
  if (ec) throw filesystem_user_error(to, "replace the file", ec);
}

}  // namespace spread
