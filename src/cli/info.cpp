// spread info: what this build is and what it sees (LibTorch, CUDA and GPUs, BLAS, threads, allocator).
#include <cxxopts.hpp>
#include <fmt/format.h>

#include "commands.h"
#include "options.h"
#include "spread/runtime/allocator.h"
#include "spread/runtime/blas.h"
#include "spread/runtime/devices.h"

namespace spread::cli {

int cmd_info(int argc, char** argv) {
  cxxopts::Options options("spread info", "What this build of spread is and which devices it sees.");
  options.add_options()("h,help", "show this help");
  auto args = parse_arguments(options, argc, argv);
  if (printed_help(options, args)) return 0;
  const BlasInfo blas = blas_info();
  const ThreadPlan threads = current_threads();  // as main() set them for every command
  fmt::print("spread: {}\n", device_line(device_report()));
  fmt::print("BLAS: {} ({}) core {} ({}); threads: LibTorch {}, BLAS {}\n", blas.library,
             blas.threading.empty() ? "?" : blas.threading, blas.core.empty() ? "?" : blas.core,
             blas.coretype_origin, threads.intra_op, threads.blas);
  fmt::print("allocator: {}\n", allocator_info());
  return 0;
}

}  // namespace spread::cli
