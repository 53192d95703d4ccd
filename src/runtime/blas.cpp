#include "spread/runtime/blas.h"

#include <dlfcn.h>
#include <unistd.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace spread {
namespace {

template <class Fn>
Fn openblas_symbol(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

std::string detected_core() {
  auto corename = openblas_symbol<char* (*)()>("openblas_get_corename");
  return corename ? lower(corename()) : "";
}

bool is_one_of(const std::string& core, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (core == n) return true;
  return false;
}

// The OPENBLAS_CORETYPE this CPU supports that beats the detected core, or "" when the detection is fine.
std::string better_core(const std::string& detected) {
  __builtin_cpu_init();
  bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (avx512 && !is_one_of(detected, {"skylakex", "cooperlake", "sapphirerapids"})) return "SkylakeX";
  if (!avx512 && avx2 && !is_one_of(detected, {"haswell", "zen", "skylakex", "cooperlake", "sapphirerapids"}))
    return "Haswell";
  return "";
}

// How the loaded OpenBLAS runs its threads ("" when OpenBLAS is not the BLAS).
std::string threading_name() {
  auto parallel = openblas_symbol<int (*)()>("openblas_get_parallel");
  if (!parallel) return "";
  switch (parallel()) {
    case 0: return "sequential";
    case 2: return "openmp";
    default: return "pthread";
  }
}

bool switched_in_place = false;  // this process switched OpenBLAS's kernels itself

// Switches the loaded OpenBLAS to `core` in this process, before its first call: a DYNAMIC_ARCH build keeps the
// chosen kernel table in one pointer, which gotoblas_dynamic_quit clears and gotoblas_dynamic_init sets again from
// OPENBLAS_CORETYPE; every blocking parameter is read through that table at call time. False where the build
// exports neither function or the switch did not take: then the process restarts instead.
bool switch_core_in_process(const std::string& core) {
  auto quit = openblas_symbol<void (*)()>("gotoblas_dynamic_quit");
  auto init = openblas_symbol<void (*)()>("gotoblas_dynamic_init");
  if (!quit || !init) return false;
  quit();
  init();
  return detected_core() == lower(core);
}

}  // namespace

void select_blas_core(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") || std::getenv("SPREAD_BLAS_REEXEC")) return;
  const char* opt = std::getenv("SPREAD_BLAS_AUTO");
  if (opt && std::string(opt) == "0") return;
  std::string detected = detected_core();
  if (detected.empty()) return;  // not OpenBLAS
  std::string core = better_core(detected);
  if (core.empty()) return;
  setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
  // In place (about 0.35 s less than a second start of LibTorch). The variables stay set: child processes load
  // OpenBLAS with the core, and SPREAD_BLAS_REEXEC marks the value as spread's and stops their own switch.
  setenv("SPREAD_BLAS_REEXEC", "from the parent process", 1);
  if (switch_core_in_process(core)) {
    switched_in_place = true;
    return;
  }
  setenv("SPREAD_BLAS_REEXEC", "restarted", 1);
  execv("/proc/self/exe", argv);
  std::fprintf(stderr, "spread: could not re-execute with OPENBLAS_CORETYPE=%s; continuing with %s\n", core.c_str(),
               detected.c_str());
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv("SPREAD_BLAS_REEXEC");
}

BlasInfo blas_info() {
  BlasInfo info;
  auto config = openblas_symbol<char* (*)()>("openblas_get_config");
  if (!config) return info;
  info.library = "OpenBLAS";
  info.config = config();
  info.core = detected_core();
  if (auto threads = openblas_symbol<int (*)()>("openblas_get_num_threads")) info.blas_threads = threads();
  info.threading = threading_name();
  const char* opt = std::getenv("SPREAD_BLAS_AUTO");
  if (switched_in_place) info.coretype_origin = "spread (auto, in place)";
  else if (const char* how = std::getenv("SPREAD_BLAS_REEXEC")) info.coretype_origin = "spread (auto, " + std::string(how) + ")";
  else if (std::getenv("OPENBLAS_CORETYPE")) info.coretype_origin = "environment";
  else if (opt && std::string(opt) == "0") info.coretype_origin = "opted out (SPREAD_BLAS_AUTO=0)";
  else info.coretype_origin = "OpenBLAS detection";
  return info;
}

namespace {

void set_thread_counts(const ThreadPlan& plan) {
  at::set_num_threads(plan.intra_op);
  // With OpenMP OpenBLAS this also sets the shared pool (omp_set_num_threads), so both numbers must agree there.
  if (auto set = openblas_symbol<void (*)(int)>("openblas_set_num_threads")) set(plan.blas);
}

}  // namespace

ThreadPlan apply_threads(int64_t requested) {
  int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  ThreadPlan plan;
  if (requested > 0) plan = {int(requested), int(requested)};
  else if (threading_name() == "pthread") plan = {1, cores};
  else plan = {cores, cores};
  set_thread_counts(plan);
  return plan;
}

ThreadPlan apply_process_threads() {
  const char* env = std::getenv("OMP_NUM_THREADS");
  char* end = nullptr;
  const long n = env ? std::strtol(env, &end, 10) : 0;
  const bool valid = env && end != env && *end == '\0' && n > 0 && n <= 4096;
  return apply_threads(valid ? n : 0);
}

ThreadPlan current_threads() {
  ThreadPlan now{at::get_num_threads(), 0};
  if (auto get = openblas_symbol<int (*)()>("openblas_get_num_threads")) now.blas = get();
  return now;
}

SingleThreaded::SingleThreaded() : saved_(current_threads()) { set_thread_counts({1, 1}); }

SingleThreaded::~SingleThreaded() { set_thread_counts(saved_); }

}  // namespace spread
