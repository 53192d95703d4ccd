#pragma once
// BLAS and threads. Debian's OpenBLAS 0.3.21 identifies AVX-512 CPUs it does not know as "Prescott" and runs
// float32 matmul 3-5x slower than its SkylakeX kernels. OpenBLAS reads OPENBLAS_CORETYPE when it loads (before
// main), so spread sets it and has the loaded OpenBLAS select its kernels again (gotoblas_dynamic_init; where the
// build lacks that, spread re-executes itself) when:
//   OpenBLAS is the BLAS, OPENBLAS_CORETYPE is unset (a value set by the user or the machine is never
//   overridden), the CPU has the instruction sets of a better core than the detected one, and
//   SPREAD_BLAS_AUTO is not "0" (the opt-out).
#include <cstdint>
#include <string>

namespace spread {

// Call first in main(), before anything else runs (and before any BLAS call). Returns only when no re-exec happened
// (or it failed).
void select_blas_core(char** argv);

struct BlasInfo {
  std::string library = "unknown";  // "OpenBLAS" or "unknown"
  std::string config;               // openblas_get_config()
  std::string core;                 // openblas_get_corename()
  std::string coretype_origin;      // "environment", "spread (auto, in place | restarted | from the parent
                                    // process)", "opted out", "OpenBLAS detection"
  std::string threading;            // "openmp", "pthread" or "sequential" (openblas_get_parallel())
  int blas_threads = 0;
};
BlasInfo blas_info();

struct ThreadPlan {
  int intra_op = 1;  // LibTorch intra-op threads
  int blas = 1;      // OpenBLAS threads
};
// requested = 0: the default measured fastest on 2 cores (bench/bench_lm.sh). With OpenBLAS's own pthreads,
// LibTorch's kernels run on one thread and OpenBLAS on all cores: two pools on the same cores made steps
// 1.7-2.6x slower. Otherwise (OpenBLAS on OpenMP, one libgomp pool for both, see CMakeLists.txt; or a LibTorch
// with MKL) both use all cores. requested = N: both get N.
ThreadPlan apply_threads(int64_t requested);

// The plan every command starts from, set in main() before it runs: OMP_NUM_THREADS when it holds a positive number
// (LibTorch's and OpenMP's convention), else apply_threads(0). LibTorch's own default is half the logical CPUs on x86
// (it assumes two hyperthreads per core): one thread on a 2-vCPU VM, where `spread encode` ran at half speed.
// Training then applies its recipe's run.threads.
ThreadPlan apply_process_threads();

// The counts in force now (blas = 0 where OpenBLAS is absent).
ThreadPlan current_threads();

// While it lives, LibTorch's operators and OpenBLAS run on one thread; the two thread counts are restored after.
// For timings that must not depend on other work on the machine: with two threads, every parallel region waits
// until both are scheduled.
class SingleThreaded {
 public:
  SingleThreaded();
  ~SingleThreaded();
  SingleThreaded(const SingleThreaded&) = delete;
  SingleThreaded& operator=(const SingleThreaded&) = delete;

 private:
  ThreadPlan saved_;  // the counts to restore
};

}  // namespace spread
