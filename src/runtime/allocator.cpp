#include "spread/runtime/allocator.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <string>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

// Read by jemalloc when it is linked in (see allocator.h); MALLOC_CONF in the environment is applied after it.
extern "C" {
const char* malloc_conf = "dirty_decay_ms:-1,muzzy_decay_ms:-1";
}

namespace spread {
namespace {

using Mallctl = int (*)(const char*, void*, size_t*, void*, size_t);

// jemalloc's description when it is the process's malloc, "" otherwise.
std::string jemalloc_description() {
  auto mallctl = reinterpret_cast<Mallctl>(dlsym(RTLD_DEFAULT, "mallctl"));
  if (!mallctl) return "";
  const char* version = nullptr;
  size_t size = sizeof(version);
  std::string text = "jemalloc";
  if (mallctl("version", &version, &size, nullptr, 0) == 0 && version) text += std::string(" ") + version;
  ssize_t decay = 0;
  size = sizeof(decay);
  if (mallctl("opt.dirty_decay_ms", &decay, &size, nullptr, 0) == 0)
    text += ", dirty_decay_ms " + std::to_string(static_cast<long long>(decay));
  return text;
}

std::string& info_slot() {
  static std::string info = "glibc defaults";
  return info;
}

bool user_tunes_malloc() {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables && std::strstr(tunables, "glibc.malloc.")) return true;
  return std::getenv("MALLOC_MMAP_THRESHOLD_") || std::getenv("MALLOC_TRIM_THRESHOLD_");
}

std::string apply_settings() {
  if (auto jemalloc = jemalloc_description(); !jemalloc.empty()) return jemalloc;
#if defined(__GLIBC__)
  const char* opt = std::getenv("SPREAD_MALLOC_TUNE");
  if (opt && std::strcmp(opt, "0") == 0) return "glibc defaults (SPREAD_MALLOC_TUNE=0)";
  if (user_tunes_malloc()) return "glibc, settings from the environment";
  constexpr int kMmapThreshold = 32 << 20;
  constexpr int kTrimThreshold = 1 << 30;
  if (mallopt(M_MMAP_THRESHOLD, kMmapThreshold) != 1 || mallopt(M_TRIM_THRESHOLD, kTrimThreshold) != 1)
    return "glibc defaults (mallopt refused)";
  return "glibc, mmap_threshold 32 MiB, trim_threshold 1 GiB (spread)";
#else
  return "not glibc: left as is";
#endif
}

}  // namespace

std::string tune_allocator() {
  info_slot() = apply_settings();
  return info_slot();
}

std::string allocator_info() { return info_slot(); }

}  // namespace spread
