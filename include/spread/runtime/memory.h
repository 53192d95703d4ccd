#pragma once
// How much memory this process can still take, for the checks that refuse work the machine cannot hold (exit code
// 2 before anything large is allocated, instead of the kernel's OOM killer later): training
// (train/memory_estimate.h) and the batched forward passes of encode, eval and diagnose (encode/forward_memory.h).
#include <string>

namespace spread {

// Bytes this process can still take: MemAvailable of /proc/meminfo, lowered to the cgroup's limit minus its usage
// when there is a limit (cgroup v2 memory.max, v1 memory.limit_in_bytes), and to the address space left under
// `ulimit -v` when that is set. `source` says which bound it is.
struct AvailableMemory {
  double bytes = 0;
  std::string source;
};
AvailableMemory available_memory();

// SPREAD_MEMORY_CHECK=0 turns the checks off (an estimate that is wrong for this machine, swap).
bool memory_checks_enabled();

// "512 MiB", "3.2 GiB".
std::string memory_size_text(double bytes);

}  // namespace spread
