#pragma once
// A file's bytes without copying them: the file mapped read-only into memory. Model weights (hundreds of MiB of
// safetensors) are copied once, from the mapping into their tensors, where reading them into a string first cost
// two more copies and the page faults of two more buffers (0.2 s of a MiniLM-sized `spread encode --model`).
// A mapped file that shrinks while it is mapped (a shard truncated under a running trainer, a weight file rewritten)
// makes the next read of its lost pages a SIGBUS. The process then prints "error: PATH: shrank while spread read it
// ..." and exits with code 2, as for any bad input, instead of dying on the signal; a SIGBUS at any other address
// goes on to the handler that was there before (the default: a crash).
#include <cstddef>
#include <string>
#include <string_view>

namespace spread {

class MappedFile {
 public:
  enum class Access { whole, random };  // whole: every byte is read once, so the pages are read in ahead

  // Throws UserError naming the path when it is a directory or device, or cannot be opened. A file that cannot be
  // mapped (a pipe) is read into memory instead.
  explicit MappedFile(const std::string& path, Access access = Access::whole);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::string_view bytes() const { return map_ ? std::string_view(static_cast<const char*>(map_), size_) : read_; }

 private:
  void* map_ = nullptr;
  size_t size_ = 0;
  void* watch_ = nullptr;  // its entry in the table the SIGBUS handler reads (mapped_file.cpp)
  std::string read_;  // the bytes of a file that could not be mapped
};

}  // namespace spread
