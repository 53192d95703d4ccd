// spread info and the device report: the LibTorch version is the one the build linked (read from the loaded
// libraries' names is not possible, so from the headers the test itself was compiled with), and "with CUDA"
// appears exactly when the process has LibTorch's CUDA library mapped, which a CUDA build does on any machine.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <fstream>
#include <string>

#include "cli_run.h"
#include "spread/runtime/devices.h"

namespace {

bool libtorch_cuda_is_mapped() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    if (line.find("libtorch_cuda.so") != std::string::npos) return true;
  return false;
}

}  // namespace

TEST(Devices, ReportNamesTheLinkedLibTorchAndWhatItSees) {
  const auto report = spread::device_report();
  EXPECT_EQ(report.libtorch, std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
                                 std::to_string(TORCH_VERSION_PATCH));
  EXPECT_EQ(report.cuda_build, libtorch_cuda_is_mapped());
  EXPECT_EQ(report.gpus, int64_t(torch::cuda::device_count()));
  const std::string line = spread::device_line(report);
  EXPECT_EQ(line.find("with CUDA") != std::string::npos, report.cuda_build) << line;
  if (report.cuda_build && report.gpus == 0) EXPECT_NE(line.find("none, so cpu only"), std::string::npos) << line;
}

TEST(Devices, InfoCommandPrintsTheReportAndTheThreads) {
  auto r = spread::testing::run_spread("info");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("spread: " + spread::device_line(spread::device_report())), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("threads: LibTorch"), std::string::npos) << r.output;
  EXPECT_EQ(spread::testing::run_spread("info --bogus").code, 2);
}
