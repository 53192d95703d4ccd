#include "spread/util/file.h"

#include <fcntl.h>
#include <unistd.h>

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

void refuse_non_file(const std::string& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);  // follows symlinks: a link to a file is that file
  switch (ec ? fs::file_type::not_found : status.type()) {
    case fs::file_type::directory:
      throw user_error(path, 0, "", "is a directory, where a file is expected", "give the path of a file");
    case fs::file_type::block:
    case fs::file_type::character:
    case fs::file_type::socket:
      throw user_error(path, 0, "", "is a device or socket, where a file is expected", "give the path of a file");
    default: return;
  }
}

std::ifstream open_input_file(const std::string& path, std::ios::openmode mode) {
  refuse_non_file(path);
  return std::ifstream(path, mode | std::ios::in);
}

std::optional<std::string> read_whole_file(const std::string& path) {
  std::ifstream in = open_input_file(path);
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

void require_writable_directory(const std::string& path) {
  make_directories(path);
  const std::string probe = (fs::path(path) / (".spread-write-check-" + std::to_string(::getpid()))).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    throw filesystem_user_error(path, "write in the directory", std::error_code(errno, std::generic_category()));
  ::close(fd);
  ::unlink(probe.c_str());
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
