#include "spread/util/mapped_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <mutex>

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

// The live mappings, for the SIGBUS handler: a fixed table it can read without locks or allocation. A slot is taken
// by a compare-and-swap of `taken`, filled, then published by storing `begin`; cleared by storing null first.
struct MappingSlot {
  std::atomic<bool> taken{false};
  std::atomic<const char*> begin{nullptr};
  size_t size = 0;
  char path[1024] = {};
};
constexpr size_t kMappingSlots = 1024;  // more mappings at once than this go unwatched (a plain SIGBUS)
MappingSlot g_mappings[kMappingSlots];
struct sigaction g_previous_sigbus {};

void write_all(const char* text, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, text, n);
    if (w <= 0) return;
    text += w, n -= size_t(w);
  }
}
void write_text(const char* text) { write_all(text, std::strlen(text)); }

// Async-signal-safe: reads the table, writes with write(2), leaves with _exit.
void on_sigbus(int signal, siginfo_t* info, void* context) {
  // si_addr means something only for a fault the kernel raised (si_code > 0), not for kill() or raise().
  const char* address = info->si_code > 0 ? static_cast<const char*>(info->si_addr) : nullptr;
  for (const MappingSlot& slot : g_mappings) {
    if (address == nullptr) break;  // nothing of ours to look up
    const char* begin = slot.begin.load(std::memory_order_acquire);
    if (begin == nullptr || address < begin || address >= begin + slot.size) continue;
    write_text("error: ");
    write_text(slot.path);
    write_text(": shrank while spread read it (the file is memory-mapped: it was truncated or rewritten in place) "
               "(leave the file alone while spread runs; write a new one under another name and rename it over)\n");
    ::_exit(2);
  }
  // Not a mapped file's: whoever handled SIGBUS before (a sanitizer), else the default action, a crash.
  if (g_previous_sigbus.sa_flags & SA_SIGINFO) {
    if (g_previous_sigbus.sa_sigaction) return g_previous_sigbus.sa_sigaction(signal, info, context);
  } else if (g_previous_sigbus.sa_handler != SIG_DFL && g_previous_sigbus.sa_handler != SIG_IGN) {
    return g_previous_sigbus.sa_handler(signal);
  }
  ::signal(SIGBUS, SIG_DFL);
  ::raise(SIGBUS);
}

void install_sigbus_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = on_sigbus;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, &g_previous_sigbus);
  });
}

// The slot now watching [begin, begin + size) for `path`, or nullptr when the table is full.
MappingSlot* watch_mapping(const void* begin, size_t size, const std::string& path) {
  install_sigbus_handler();
  for (MappingSlot& slot : g_mappings) {
    bool expected = false;
    if (!slot.taken.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) continue;
    slot.size = size;
    const size_t n = std::min(path.size(), sizeof slot.path - 1);
    std::memcpy(slot.path, path.data(), n);
    slot.path[n] = '\0';
    slot.begin.store(static_cast<const char*>(begin), std::memory_order_release);
    return &slot;
  }
  return nullptr;
}

void unwatch_mapping(MappingSlot* slot) {
  if (slot == nullptr) return;
  slot->begin.store(nullptr, std::memory_order_release);
  slot->taken.store(false, std::memory_order_release);
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
      watch_ = watch_mapping(map_, size_, path);
    }
  }
  // A pipe, or a file the kernel would not map, is read from the descriptor already open: a pipe opened a second
  // time would wait for a second writer.
  const bool read_ok = map_ || read_to_end(fd, read_);
  ::close(fd);
  if (!read_ok) throw user_error(path, 0, "", "cannot read the file", "check the path and its permissions");
}

MappedFile::~MappedFile() {
  unwatch_mapping(static_cast<MappingSlot*>(watch_));
  if (map_) ::munmap(map_, size_);
}

}  // namespace spread
