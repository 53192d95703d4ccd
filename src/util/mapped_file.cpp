#include "spread/util/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "spread/util/error.h"
#include "spread/util/file.h"

namespace spread {
namespace {

// The rest of an open file's bytes (a pipe's, until its writer closes it), or false on a read error.
bool read_to_end(int fd, std::string& out) {
  char chunk[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n == 0) return true;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    out.append(chunk, size_t(n));
  }
}

}  // namespace

MappedFile::MappedFile(const std::string& path, Access access) {
  refuse_non_file(path);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw user_error(path, 0, "", "cannot open the file", "check the path and its permissions");
  struct stat st {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  if (regular && st.st_size > 0) {
    const int flags = MAP_PRIVATE | (access == Access::whole ? MAP_POPULATE : 0);
    void* map = ::mmap(nullptr, size_t(st.st_size), PROT_READ, flags, fd, 0);
    if (map != MAP_FAILED) {
      map_ = map;
      size_ = size_t(st.st_size);
    }
  }
  // A pipe, or a file the kernel would not map, is read from the descriptor already open: a pipe opened a second
  // time would wait for a second writer.
  const bool read_ok = map_ || read_to_end(fd, read_);
  ::close(fd);
  if (!read_ok) throw user_error(path, 0, "", "cannot read the file", "check the path and its permissions");
}

MappedFile::~MappedFile() {
  if (map_) ::munmap(map_, size_);
}

}  // namespace spread
