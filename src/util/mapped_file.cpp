#include "spread/util/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "spread/util/error.h"
#include "spread/util/file.h"

namespace spread {

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
  ::close(fd);
  if (map_ || (regular && st.st_size == 0)) return;
  auto bytes = read_whole_file(path);  // a pipe, or a file the kernel would not map
  if (!bytes) throw user_error(path, 0, "", "cannot read the file", "check the path and its permissions");
  read_ = std::move(*bytes);
}

MappedFile::~MappedFile() {
  if (map_) ::munmap(map_, size_);
}

}  // namespace spread
