#pragma once
// The memory allocator for training. LibTorch on CPU frees and reallocates the same activation-sized buffers
// (0.1-30 MiB) every step, and glibc malloc handles that pattern badly:
//  - blocks above its mmap threshold (128 KiB, raised dynamically at most to 32 MiB) are fresh mmap()s, so every
//    step page-faults and zeroes its activations again: shape B of bench/bench_lm.sh spent a third of its
//    time in the kernel and ran ~1.8x slower than with the threshold raised;
//  - with the threshold raised, its heap fragments: peak RSS of shape B was ~170 MiB above jemalloc's.
// So the executables link jemalloc when the build finds it (CMake option SPREAD_JEMALLOC), configured never to
// return freed pages to the kernel (dirty_decay_ms:-1, muzzy_decay_ms:-1: purging on the hot path made steps
// several times slower); MALLOC_CONF overrides that. Without jemalloc, tune_allocator() raises glibc's
// M_MMAP_THRESHOLD to 32 MiB (the most glibc accepts) and M_TRIM_THRESHOLD to 1 GiB; setting only the trim
// threshold is much worse (it freezes the mmap threshold at 128 KiB), so both or neither. glibc is left alone
// when the user tunes it (GLIBC_TUNABLES with glibc.malloc.*, MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_),
// and SPREAD_MALLOC_TUNE=0 opts out.
#include <string>

namespace spread {

// Call early in main(), before large allocations. Returns a one-line description (also kept for allocator_info).
std::string tune_allocator();
// What tune_allocator() found and did, for the run header and run.json.
std::string allocator_info();

}  // namespace spread
