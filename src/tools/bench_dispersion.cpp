// Micro benchmark of the dispersion loss: forward + backward on a [B, T, F] float32 tensor that requires grad,
// default options (angular, tau 1, t 0.1, max_tokens 256) unless told otherwise. Prints the median (and min) of
// --reps timed repetitions (after --warmup untimed ones), in milliseconds of wall time and of process CPU time.
// Compare with a training step's time: the budget for last-layer dispersion on the 6-layer, width 384, block 256,
// batch 8 GPT is 3%.
//   bench_dispersion [--batch 8] [--tokens 256] [--width 384] [--variant angular] [--reps 21] [--threads 0]
//                    [--padded]
// --threads 0 is the trainer's default split (runtime/blas.h).
#include <sys/resource.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "spread/diagnostics/socm.h"
#include "spread/losses/dispersion.h"
#include "spread/runtime/allocator.h"
#include "spread/runtime/blas.h"

namespace {

struct Args {
  int64_t batch = 8, tokens = 256, width = 384, reps = 21, warmup = 3, threads = 0;
  std::string variant = "angular";
  bool padded = false;  // a mask with one padded position per sequence (the masked path)
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_dispersion: %s needs a value\n", k.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (k == "--batch") a.batch = std::stoll(next());
    else if (k == "--tokens") a.tokens = std::stoll(next());
    else if (k == "--width") a.width = std::stoll(next());
    else if (k == "--reps") a.reps = std::stoll(next());
    else if (k == "--warmup") a.warmup = std::stoll(next());
    else if (k == "--threads") a.threads = std::stoll(next());
    else if (k == "--variant") a.variant = next();
    else if (k == "--padded") a.padded = true;
    else {
      std::fprintf(stderr, "bench_dispersion: unknown argument %s\n", k.c_str());
      std::exit(2);
    }
  }
  return a;
}

// Process CPU time (all threads), which a busy machine distorts far less than wall time.
double cpu_ms() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

double median(const std::vector<double>& v) { return spread::quantiles(v).p50; }

}  // namespace

int main(int argc, char** argv) {
  spread::select_blas_core(argv);  // as the trainer does: the right OpenBLAS kernels and thread split
  spread::tune_allocator();
  Args a = parse(argc, argv);
  spread::ThreadPlan threads = spread::apply_threads(a.threads);
  spread::DispersionOptions opt;
  opt.variant = a.variant;
  torch::manual_seed(0);
  torch::Tensor hidden = torch::randn({a.batch, a.tokens, a.width}).requires_grad_(true);
  torch::Tensor mask;
  if (a.padded) {
    mask = torch::ones({a.batch, a.tokens}, torch::kBool);
    mask.select(1, a.tokens - 1).fill_(false);
  }

  std::vector<double> wall, cpu;
  for (int64_t r = 0; r < a.warmup + a.reps; ++r) {
    hidden.mutable_grad() = torch::Tensor();
    auto t0 = std::chrono::steady_clock::now();
    double c0 = cpu_ms();
    spread::dispersion_loss(hidden, mask, opt, static_cast<uint64_t>(r)).backward();
    double c1 = cpu_ms();
    auto t1 = std::chrono::steady_clock::now();
    if (r < a.warmup) continue;
    wall.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    cpu.push_back(c1 - c0);
  }
  std::printf("dispersion %s [%lld, %lld, %lld] float32%s, threads %d intra-op / %d BLAS, %lld reps: "
              "forward+backward median %.2f ms wall (min %.2f), %.2f ms process CPU (min %.2f)\n",
              a.variant.c_str(), static_cast<long long>(a.batch), static_cast<long long>(a.tokens),
              static_cast<long long>(a.width), a.padded ? " padded" : "", threads.intra_op, threads.blas,
              static_cast<long long>(a.reps), median(wall), *std::min_element(wall.begin(), wall.end()), median(cpu),
              *std::min_element(cpu.begin(), cpu.end()));
  return 0;
}
