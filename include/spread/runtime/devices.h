#pragma once
// What this build of spread is and which devices it sees: the LibTorch it was built against, whether that
// LibTorch has CUDA, and how many GPUs it finds. A CUDA build on a machine without a GPU is a normal case (it
// trains on the CPU), so nothing here throws.
#include <cstdint>
#include <string>

namespace spread {

struct DeviceReport {
  std::string libtorch;  // the headers' version, e.g. "2.11.0"
  bool cuda_build = false;
  int64_t gpus = 0;      // torch::cuda::device_count(); 0 without CUDA or without a GPU
};
DeviceReport device_report();

// One line: "LibTorch 2.11.0 with CUDA; GPUs: 1 (cuda:0)", "... with CUDA; GPUs: none, so cpu only", or
// "LibTorch 1.13.0 (CPU only)".
std::string device_line(const DeviceReport& report);

}  // namespace spread
