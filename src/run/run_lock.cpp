#include "spread/run/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fmt/format.h>
#include <system_error>

#include "spread/util/file.h"

namespace spread {
namespace {

// The pid the holder wrote into the file; empty while it has not yet written it.
std::string holder_pid(int fd) {
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string pid(buf, size_t(std::max<ssize_t>(n, 0)));
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  return pid;
}

void write_pid(int fd) {
  const std::string pid = std::to_string(::getpid()) + "\n";
  // Only the lock protects the run; the pid is for the message of a refused process, so a failed write is no error.
  if (::ftruncate(fd, 0) == 0 && ::pwrite(fd, pid.data(), pid.size(), 0) == ssize_t(pid.size())) ::fsync(fd);
}

}  // namespace

RunLock::RunLock(const std::string& run_dir) {
  const std::string path = (std::filesystem::path(run_dir) / "train.lock").string();
  // No O_TRUNC: the file may hold the pid of a live holder, which a refused process reports. O_NOFOLLOW: a link
  // planted here would have the pid written over the file it points to.
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd_ < 0 && errno == ELOOP)
    throw user_error(path, 0, "", "is a symbolic link; spread writes its lock only into a file of its own",
                     "remove the link (rm " + path + "); the file it points to was not touched");
  if (fd_ < 0)
    throw filesystem_user_error(path, "create the run's lock file", std::error_code(errno, std::generic_category()));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string pid = holder_pid(fd_);
    ::close(fd_);
    fd_ = -1;
    if (err != EWOULDBLOCK)
      throw filesystem_user_error(path, "lock the run directory", std::error_code(err, std::generic_category()));
    throw user_error(run_dir, 0, "",
                     fmt::format("another spread process ({}) is training this run",
                                 pid.empty() ? "pid unknown" : "pid " + pid),
                     "wait for it to end, or stop it (a stopped run continues with spread train --resume)");
  }
  write_pid(fd_);
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the lock
}

}  // namespace spread
