#include "spread/runtime/precision.h"

#include "spread/runtime/blas.h"
#include "spread/runtime/direct_mm.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace spread {
namespace {

bool flag_set(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::string(v) != "" && std::string(v) != "0";
}

bool forced_off() { return flag_set("SPREAD_FORCE_NO_BF16"); }

struct ProductRates {
  double fp32_gflops = 0, bf16_gflops = 0;
};

// The forward product: float32 through LibTorch (OpenBLAS; a training model's float32 products go to oneDNN's
// sgemm where the process has it, model/direct_linear.h), bf16 as training runs it, through the process's bf16 GEMM
// writing float32 where it has one, else LibTorch's bf16 mm.
void product(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() == at::kBFloat16 && has_bf16_gemm())
    direct_mm(a, b);
  else
    at::mm(a, b);
}

double seconds_of_product(const at::Tensor& a, const at::Tensor& b) {
  const auto start = std::chrono::steady_clock::now();
  product(a, b);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The best of several timings of one [m, k] x [k, n] product in float32 and in bf16, in GFLOP/s of one thread. The
// shape is one of shape B's linear layers at a quarter of its rows (~0.45 GFLOP). On one thread and in turn, so that
// other work on the machine cannot decide: on two threads, beside other processes, each parallel region waited for
// a scheduler time slice, the short bf16 product (oneDNN runs more regions per call than OpenBLAS) was clocked at a
// 30th of its speed, below float32, and runs fell back to float32.
ProductRates time_products() {
  const SingleThreaded one_thread;
  const int64_t m = 512, k = 384, n = 1152;
  // Fixed values, not random ones: the check must not draw from the generator that training's dropout uses.
  auto a = at::linspace(-1.0, 1.0, m * k).view({m, k});
  auto b = at::linspace(1.0, -1.0, k * n).view({k, n});
  auto a16 = a.to(at::kBFloat16), b16 = b.to(at::kBFloat16);
  product(a, b);  // first calls: oneDNN builds its kernel, OpenBLAS starts its threads
  product(a16, b16);
  double best32 = 1e30, best16 = 1e30;
  for (int round = 0; round < 8; ++round) {
    best32 = std::min(best32, seconds_of_product(a, b));
    best16 = std::min(best16, seconds_of_product(a16, b16));
  }
  const double gflop = 2.0 * double(m) * double(k) * double(n) / 1e9;
  return {gflop / best32, gflop / best16};
}

}  // namespace

std::string cpu_bf16_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') == std::string::npos ? 0 : line.find(':') + 1));
    std::string word, found;
    while (words >> word)
      if (word == "avx512_bf16" || word == "amx_bf16") found += (found.empty() ? "" : " ") + word;
    return found;  // the first processor's flags stand for all
  }
  return "";
}

PrecisionPlan plan_precision(const std::string& requested, const c10::Device& device) {
  PrecisionPlan plan;
  plan.requested = requested;
  if (requested != "bf16") return plan;
  if (forced_off()) {
    plan.reason = "SPREAD_FORCE_NO_BF16 is set";
    return plan;
  }
  if (!device.is_cpu()) {
    plan.used = "bf16";
    plan.reason = "device " + device.str() + " (not checked)";
    return plan;
  }
  plan.cpu_flags = cpu_bf16_flags();
  if (plan.cpu_flags.empty()) {
    plan.reason = "the CPU has neither avx512_bf16 nor amx_bf16";
    return plan;
  }
  if (flag_set("SPREAD_FORCE_BF16")) {
    plan.used = "bf16";
    plan.reason = "CPU flags " + plan.cpu_flags + "; SPREAD_FORCE_BF16 is set (no speed check)";
    return plan;
  }
  const ProductRates rates = time_products();
  plan.fp32_gflops = rates.fp32_gflops;
  plan.bf16_gflops = rates.bf16_gflops;
  if (plan.bf16_gflops <= plan.fp32_gflops) {
    plan.reason = fmt::format("a bf16 product ran at {:.0f} GFLOP/s on one thread, not faster than float32's {:.0f}",
                              plan.bf16_gflops, plan.fp32_gflops);
    return plan;
  }
  plan.used = "bf16";
  plan.reason = fmt::format("CPU flags {}; a bf16 product ran at {:.0f} GFLOP/s on one thread against float32's "
                            "{:.0f}", plan.cpu_flags, plan.bf16_gflops, plan.fp32_gflops);
  return plan;
}

std::string PrecisionPlan::header_line() const {
  if (used == "bf16")
    return "precision: bf16 for the products of linear layers, the LM head and CPU attention (float32 "
           "accumulation); float32 weights, optimizer, softmax, LayerNorm, GELU, losses (" + reason + ")";
  if (requested == "bf16") return "warning: train.precision = \"bf16\" falls back to float32: " + reason;
  return "precision: fp32";
}

nlohmann::json PrecisionPlan::to_json() const {
  nlohmann::json j = {{"requested", requested}, {"used", used}};
  if (used == "bf16") j["bf16"] = {"linear layers", "LM head"};
  if (!reason.empty()) j["reason"] = reason;
  if (!cpu_flags.empty()) j["cpu_bf16_flags"] = cpu_flags;
  if (fp32_gflops > 0) {
    j["fp32_matmul_gflops"] = fp32_gflops;
    j["bf16_matmul_gflops"] = bf16_gflops;
  }
  return j;
}

}  // namespace spread
