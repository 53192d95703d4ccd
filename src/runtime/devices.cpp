#include "spread/runtime/devices.h"

#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/version.h>

namespace spread {

DeviceReport device_report() {
  DeviceReport r;
  r.libtorch = fmt::format("{}.{}.{}", TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR, TORCH_VERSION_PATCH);
#ifdef SPREAD_WITH_CUDA
  r.cuda_build = true;
#endif
  r.gpus = int64_t(torch::cuda::device_count());
  return r;
}

std::string device_line(const DeviceReport& report) {
  if (!report.cuda_build) return fmt::format("LibTorch {} (CPU only)", report.libtorch);
  if (report.gpus == 0) return fmt::format("LibTorch {} with CUDA; GPUs: none, so cpu only", report.libtorch);
  return fmt::format("LibTorch {} with CUDA; GPUs: {} (cuda:0{})", report.libtorch, report.gpus,
                     report.gpus > 1 ? fmt::format("..cuda:{}", report.gpus - 1) : "");
}

}  // namespace spread
