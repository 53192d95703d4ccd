#include "spread/runtime/memory.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <utility>

namespace spread {
namespace {

constexpr double kMiB = 1024.0 * 1024.0, kGiB = 1024.0 * kMiB;

std::optional<double> read_number(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return std::nullopt;
  try {
    return std::stod(text);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// The cgroup's limit minus its usage (v2, then v1), when a limit is set.
std::optional<double> cgroup_room() {
  for (const auto& [limit, usage] : {std::pair<const char*, const char*>{"/sys/fs/cgroup/memory.max",
                                                                         "/sys/fs/cgroup/memory.current"},
                                     {"/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                      "/sys/fs/cgroup/memory/memory.usage_in_bytes"}}) {
    const auto l = read_number(limit), u = read_number(usage);
    // cgroup v1 writes "no limit" as a number near 2^63.
    if (l && u && *l < 1e18) return std::max(0.0, *l - *u);
  }
  return std::nullopt;
}

// The address space left under `ulimit -v` (RLIMIT_AS less this process's virtual size), when it is set: an
// allocation past it fails although the machine has memory.
std::optional<double> address_space_room() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return std::nullopt;
  std::ifstream statm("/proc/self/statm");
  double pages = 0;
  if (!(statm >> pages)) return std::nullopt;
  return std::max(0.0, double(limit.rlim_cur) - pages * double(::sysconf(_SC_PAGESIZE)));
}

}  // namespace

AvailableMemory available_memory() {
  AvailableMemory out{0, "MemAvailable of /proc/meminfo"};
  std::ifstream in("/proc/meminfo");
  std::string name;
  double kib = 0;
  std::string unit;
  while (in >> name >> kib >> unit)
    if (name == "MemAvailable:") out.bytes = kib * 1024;
  if (const auto room = cgroup_room(); room && *room < out.bytes) out = {*room, "the cgroup's memory limit less its usage"};
  if (const auto room = address_space_room(); room && *room < out.bytes)
    out = {*room, "ulimit -v less this process's address space"};
  return out;
}

bool memory_checks_enabled() {
  const char* off = std::getenv("SPREAD_MEMORY_CHECK");
  return off == nullptr || std::string(off) != "0";
}

std::string memory_size_text(double bytes) {
  return bytes >= kGiB ? fmt::format("{:.1f} GiB", bytes / kGiB) : fmt::format("{:.0f} MiB", bytes / kMiB);
}

}  // namespace spread
