#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <iostream>
#include <thread>
#include <utility>

#include "cli_run.h"
#include "spread/runtime/blas.h"

namespace {

// Restores LibTorch's thread count for the tests that follow in this process (ctest runs each test alone).
struct ThreadsGuard {
  int torch_threads = at::get_num_threads();
  ~ThreadsGuard() { at::set_num_threads(torch_threads); }
};

}  // namespace

TEST(Blas, LoadsTheOpenMpBuildOfOpenBlasWhenBuiltForIt) {
  const auto info = spread::blas_info();
#if SPREAD_EXPECT_OPENBLAS_OPENMP
  // CMake found Debian's OpenMP build and set the RPATH: the process must have loaded it, not the system's choice.
  EXPECT_EQ(info.library, "OpenBLAS");
  EXPECT_EQ(info.threading, "openmp");
#else
  // Without the RPATH: whatever the system selected (or MKL inside a pip LibTorch, which is not OpenBLAS).
  if (info.library == "OpenBLAS") EXPECT_TRUE(info.threading == "pthread" || info.threading == "sequential" ||
                                              info.threading == "openmp") << info.threading;
#endif
}

// Where OpenBLAS misdetects the CPU, spread switches its kernels in the running process (no second start of
// LibTorch) and `spread info` names the core it switched to; where the detection is right, nothing changes.
TEST(Blas, AMisdetectedCoreIsSwitchedInPlace) {
  const auto r = spread::testing::run_spread_env("env -u OPENBLAS_CORETYPE -u SPREAD_BLAS_REEXEC -u SPREAD_BLAS_AUTO",
                                                 "info");
  ASSERT_EQ(r.code, 0) << r.output;
  if (r.output.find("OpenBLAS (") == std::string::npos) GTEST_SKIP() << "OpenBLAS is not the BLAS: " << r.output;
  if (r.output.find("(OpenBLAS detection)") != std::string::npos) {
    std::cout << "OpenBLAS detected this CPU well; nothing to switch: " << r.output;
    return;
  }
  // In place where the loaded OpenBLAS exports the switch (Debian's 0.3.21 does); a restart otherwise.
  const bool can_switch = dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init") != nullptr;
  EXPECT_NE(r.output.find(can_switch ? "(spread (auto, in place))" : "(spread (auto, restarted))"), std::string::npos)
      << r.output;
  EXPECT_TRUE(r.output.find("core skylakex") != std::string::npos ||
              r.output.find("core haswell") != std::string::npos) << r.output;
}

TEST(Blas, DefaultThreadPlanNeverRunsTwoPoolsOnTheSameCores) {
  ThreadsGuard guard;
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  const auto plan = spread::apply_threads(0);
  EXPECT_EQ(at::get_num_threads(), plan.intra_op);
  EXPECT_EQ(plan.blas, cores);
  const auto info = spread::blas_info();
  if (info.threading == "pthread") EXPECT_EQ(plan.intra_op, 1);  // OpenBLAS's own pool takes the cores
  else EXPECT_EQ(plan.intra_op, cores);                          // one shared libgomp pool, or no OpenBLAS
  if (info.library == "OpenBLAS") {
    EXPECT_GE(info.blas_threads, 1);
    EXPECT_LE(info.blas_threads, cores);  // OpenBLAS caps it at the thread count it was built for
  }

  const auto three = spread::apply_threads(3);
  EXPECT_EQ(three.intra_op, 3);
  EXPECT_EQ(three.blas, 3);
  EXPECT_EQ(at::get_num_threads(), 3);
}

namespace {

// The "threads: LibTorch N, BLAS M" of `spread info`, which reports the counts main() set for every command.
std::pair<int, int> reported_threads(const std::string& info_output) {
  const auto at = info_output.find("threads: LibTorch ");
  if (at == std::string::npos) return {-1, -1};
  int torch = -1, blas = -1;
  std::sscanf(info_output.c_str() + at, "threads: LibTorch %d, BLAS %d", &torch, &blas);
  return {torch, blas};
}

}  // namespace

// Every command starts on all cores (LibTorch alone starts x86 processes on half the logical CPUs: one thread on a
// 2-vCPU machine, where `spread encode` ran at half speed), or on OMP_NUM_THREADS where the user set it.
TEST(Blas, EveryCommandStartsOnAllCoresOrOnOmpNumThreads) {
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  const auto unset = spread::testing::run_spread_env("env -u OMP_NUM_THREADS -u MKL_NUM_THREADS", "info");
  ASSERT_EQ(unset.code, 0) << unset.output;
  const bool pthread_blas = unset.output.find("(pthread)") != std::string::npos;
  EXPECT_EQ(reported_threads(unset.output).first, pthread_blas ? 1 : cores) << unset.output;

  const auto three = spread::testing::run_spread_env("env OMP_NUM_THREADS=3", "info");
  ASSERT_EQ(three.code, 0) << three.output;
  EXPECT_EQ(reported_threads(three.output).first, 3) << three.output;
  const auto junk = spread::testing::run_spread_env("env -u MKL_NUM_THREADS OMP_NUM_THREADS=many", "info");
  ASSERT_EQ(junk.code, 0) << junk.output;
  EXPECT_EQ(reported_threads(junk.output).first, pthread_blas ? 1 : cores) << junk.output;
}
