// Measures the float32 matmul peak of this machine as LibTorch sees it (the denominator of MFU): the best of
// several square matmuls at a few sizes, with the same BLAS and thread settings `spread train` uses. On a CPU
// with bf16 instructions (runtime/precision.h) the same for bf16 (LibTorch's oneDNN path), the denominator of a
// bf16 run's MFU; 0 elsewhere (LibTorch would emulate it).
#include <ATen/ATen.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>

#include "spread/runtime/allocator.h"
#include "spread/runtime/blas.h"
#include "spread/runtime/precision.h"

int main(int argc, char** argv) {
  spread::select_blas_core(argv);
  spread::tune_allocator();  // as `spread train` runs
  int64_t threads = argc > 1 ? std::atoll(argv[1]) : 0;
  auto plan = spread::apply_threads(threads);
  auto info = spread::blas_info();
  auto peak = [](at::ScalarType dtype) {
    double best = 0;
    for (int64_t n : {512, 1024, 2048}) {
      auto a = at::randn({n, n}).to(dtype), b = at::randn({n, n}).to(dtype), c = at::empty({n, n}, a.options());
      at::mm_out(c, a, b);  // warm-up
      const int reps = n <= 512 ? 40 : n <= 1024 ? 8 : 3;
      for (int r = 0; r < reps; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        at::mm_out(c, a, b);
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        best = std::max(best, 2.0 * double(n * n * n) / s / 1e9);
      }
    }
    return best;
  };
  const double best = peak(at::kFloat);
  const double best_bf16 = spread::cpu_bf16_flags().empty() ? 0.0 : peak(at::kBFloat16);
  fmt::print("{{\"matmul_peak_gflops\": {:.1f}, \"bf16_matmul_peak_gflops\": {:.1f}, \"blas\": \"{}\", "
             "\"threading\": \"{}\", \"core\": \"{}\", \"origin\": \"{}\", \"intra_op_threads\": {}, "
             "\"blas_threads\": {}}}\n",
             best, best_bf16, info.library, info.threading, info.core, info.coretype_origin, plan.intra_op, plan.blas);
  return 0;
}
