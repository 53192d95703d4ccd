#include "spread/util/file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
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

namespace {

const char* kind_of(fs::file_type type) {
  switch (type) {
    case fs::file_type::directory: return "a directory";
    case fs::file_type::fifo: return "a FIFO (named pipe)";
    case fs::file_type::block:
    case fs::file_type::character: return "a device";
    case fs::file_type::socket: return "a socket";
    default: return "not a regular file";
  }
}

UserError not_regular(const std::string& path, fs::file_type type) {
  return user_error(path, 0, "", std::string("is ") + kind_of(type) + ", where a regular file is expected",
                    "a model, tokenizer or data folder holds the files themselves: put the file in its place");
}

fs::file_type type_of(mode_t mode) {
  if (S_ISREG(mode)) return fs::file_type::regular;
  if (S_ISDIR(mode)) return fs::file_type::directory;
  if (S_ISFIFO(mode)) return fs::file_type::fifo;
  if (S_ISCHR(mode)) return fs::file_type::character;
  if (S_ISBLK(mode)) return fs::file_type::block;
  if (S_ISSOCK(mode)) return fs::file_type::socket;
  return fs::file_type::unknown;
}

// Up to `size` bytes of `fd` from its start (fewer when the file shrank meanwhile); false on a read error.
bool read_exactly(int fd, size_t size, std::string& out) {
  out.resize(size);
  size_t have = 0;
  while (have < size) {
    const ssize_t n = ::read(fd, out.data() + have, size - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) break;
    have += size_t(n);
  }
  out.resize(have);
  return true;
}

}  // namespace

void require_regular_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;  // missing or unreadable: the reader names it
  if (!S_ISREG(st.st_mode)) throw not_regular(path, type_of(st.st_mode));
}

std::optional<std::string> read_regular_file(const std::string& path, uint64_t max_bytes) {
  require_regular_file(path);  // before open: opening a device can have effects of its own (a tape rewinds)
  // O_NONBLOCK: a FIFO swapped in after the check opens at once instead of waiting for a writer, then fstat refuses it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  const bool stat_ok = ::fstat(fd, &st) == 0;
  if (stat_ok && !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw not_regular(path, type_of(st.st_mode));
  }
  if (stat_ok && uint64_t(st.st_size) > max_bytes) {
    ::close(fd);
    throw user_error(path, 0, "", "is " + std::to_string(st.st_size) + " bytes, more than the " +
                                      std::to_string(max_bytes) + " that spread reads for such a file",
                     "check that it is the file the folder should hold");
  }
  std::string bytes;
  const bool read_ok = stat_ok && read_exactly(fd, size_t(st.st_size), bytes);
  ::close(fd);
  if (!read_ok) return std::nullopt;
  return bytes;
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

// --- outputs (file.h): checks before the work, temporary name and rename, stale temporaries of killed processes

namespace {

fs::path folder_of(const fs::path& path) { return path.has_parent_path() ? path.parent_path() : fs::path("."); }

void refuse_symlink(const fs::path& path, const std::string& option) {
  std::error_code ec;
  if (fs::is_symlink(path, ec))
    throw user_error(path.string(), 0, option, "is a symbolic link; spread neither replaces nor writes through one",
                     "give the link's target (" + fs::read_symlink(path, ec).string() + ") or another name");
}

// A FIFO, device or socket at an output's name would be replaced by the rename that puts the output in place
// (`--out /dev/null` run as root would replace /dev/null), and writing into one instead would break the promise
// of a whole file or none: refused, as a link is.
void refuse_special(const fs::path& path, const std::string& option) {
  refuse_symlink(path, option);
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(path, ec);
  if (ec || !fs::exists(st) || fs::is_regular_file(st) || fs::is_directory(st)) return;
  throw user_error(path.string(), 0, option,
                   std::string("is ") + kind_of(st.type()) + "; spread writes an output whole under a new name and "
                   "renames it over this one, which would replace it",
                   "give the name of a regular file (or of none yet)");
}

// `folder` exists and this process may create and rename entries in it.
void check_writable_folder(const fs::path& folder, const std::string& path, const std::string& option) {
  if (::access(folder.c_str(), W_OK | X_OK) == 0) return;
  const std::error_code ec(errno, std::generic_category());
  throw user_error(path, 0, option, "cannot write into the folder " + folder.string() + ": " + ec.message(),
                   hint_for(ec));
}

void sync_path(const fs::path& path, int flags) {
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

namespace {

// A temporary's name says that spread made it (a marker no user would choose; a user's ".notes.tmp-2" is no
// temporary) and on which host: a PID means nothing on another machine that shares the folder.
constexpr const char* kTemporaryMarker = ".spread-tmp-";

// The host name with anything but [A-Za-z0-9.-] as '_', so that it is safe in a file name.
const std::string& this_host() {
  static const std::string host = [] {
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return std::string("localhost");
    std::string h(name);
    for (char& c : h)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') c = '_';
    return h;
  }();
  return host;
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

fs::path temporary_name(const fs::path& path) {
  return folder_of(path) /
         ("." + path.filename().string() + kTemporaryMarker + this_host() + "-" + std::to_string(::getpid()));
}

std::optional<std::string> stale_temporary_of(const std::string& name) {
  const std::string tail = kTemporaryMarker + this_host() + "-";
  const size_t at = name.rfind(tail);
  if (name.empty() || name[0] != '.' || at == std::string::npos || at < 2) return std::nullopt;
  const std::string pid_text = name.substr(at + tail.size());
  if (!all_digits(pid_text) || pid_text.size() > 9) return std::nullopt;
  const pid_t pid = pid_t(std::stol(pid_text));
  const bool dead = pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH;  // EPERM: alive, another user's
  if (!dead) return std::nullopt;
  return name.substr(1, at - 1);
}

void check_output_file(const std::string& path, const std::string& option) {
  if (path.empty()) throw user_error("", 0, option, "give a file name");
  const fs::path p(path);
  refuse_special(p, option);
  std::error_code ec;
  if (fs::is_directory(p, ec))
    throw user_error(path, 0, option, "is a directory", "give a file name, e.g. " + (p / "out").string());
  check_writable_folder(folder_of(p), path, option);
}

void check_output_folder(const std::string& path, const std::string& option) {
  if (path.empty()) throw user_error("", 0, option, "give a folder name");
  const fs::path p(path);
  refuse_symlink(p, option);
  std::error_code ec;
  if (fs::exists(p, ec) && !fs::is_directory(p, ec))
    throw user_error(path, 0, option, "is a file", "choose a new or empty folder");
  fs::path above = fs::absolute(p, ec).parent_path();
  while (!fs::exists(above, ec) && above.has_relative_path()) above = above.parent_path();
  check_writable_folder(above, path, option);
}

void prepare_output_file(const std::string& path, const std::string& option) {
  check_output_file(path, option);
  remove_stale_temporaries(folder_of(path).string());
}

void remove_stale_temporaries(const std::string& folder) {
  std::error_code ec;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec))
    if (stale_temporary_of(it->path().filename().string())) {
      std::error_code ignored;  // another process may be removing it too
      fs::remove_all(it->path(), ignored);
    }
}

namespace {

// `write`'s bytes under the temporary name of `path`, flushed but not synced; removed again on any error.
fs::path write_temporary(const fs::path& path, const std::function<void(std::ostream&)>& write) {
  refuse_special(path, "");
  const fs::path tmp = temporary_name(path);
  try {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      const std::error_code ec(errno, std::generic_category());
      throw filesystem_user_error(path.string(), "create the file", ec);
    }
    errno = 0;
    write(out);
    out.flush();
    if (!out) {
      const std::error_code ec(errno ? errno : EIO, std::generic_category());
      throw filesystem_user_error(path.string(), "write the file", ec);
    }
  } catch (...) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw;
  }
  return tmp;
}

}  // namespace

void sync_folder(const std::string& folder) { sync_path(folder, O_RDONLY | O_DIRECTORY); }

void write_output_file(const std::string& path, const std::function<void(std::ostream&)>& write) {
  const fs::path p(path);
  const fs::path tmp = write_temporary(p, write);
  try {
    sync_path(tmp, O_RDONLY);
    rename_file(tmp.string(), path);
  } catch (...) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw;
  }
  sync_path(folder_of(p), O_RDONLY | O_DIRECTORY);
}

void write_file_atomic(const std::string& path, const std::string& contents) {
  write_output_file(path, [&](std::ostream& out) { out.write(contents.data(), std::streamsize(contents.size())); });
}

OutputFileGroup::~OutputFileGroup() {
  for (const auto& [tmp, final_name] : pending_) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
  }
}

void OutputFileGroup::add(const std::string& path, const std::function<void(std::ostream&)>& write) {
  pending_.emplace_back(write_temporary(fs::path(path), write), fs::path(path));
}

void OutputFileGroup::commit() {
  if (pending_.empty()) return;
  // One syncfs per filesystem makes every temporary's data durable; where it fails, each file is synced.
  const int fd = ::open(folder_of(pending_.front().second).c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0 || ::syncfs(fd) != 0)
    for (const auto& entry : pending_) sync_path(entry.first, O_RDONLY);
  if (fd >= 0) ::close(fd);
  std::vector<fs::path> folders;
  while (!pending_.empty()) {
    const auto [tmp, final_name] = pending_.back();
    rename_file(tmp.string(), final_name.string());  // on failure the destructor removes what is left
    pending_.pop_back();
    if (std::find(folders.begin(), folders.end(), folder_of(final_name)) == folders.end())
      folders.push_back(folder_of(final_name));
  }
  for (const auto& folder : folders) sync_path(folder, O_RDONLY | O_DIRECTORY);
}

}  // namespace spread
