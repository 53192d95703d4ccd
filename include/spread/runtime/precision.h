#pragma once
// What runs in bf16 under train.precision = "bf16", decided once at the start of a run.
// On CPU, bf16 is used only where it pays: the CPU flags name a bf16 instruction set (avx512_bf16 or amx_bf16,
// which LibTorch 1.13's oneDNN uses for bf16 mm/addmm/bmm) AND one small bf16 product, timed on one thread in turn
// with the same product in float32 (the best of 8 timings each), is faster. Otherwise the run falls back to float32
// with a one-line warning: LibTorch would emulate bf16 products on a CPU without those instructions, several times
// slower than float32.
// SPREAD_FORCE_NO_BF16=1 in the environment forces the fallback (tests, or to compare on one machine).
// SPREAD_FORCE_BF16=1 skips the speed check on a CPU with bf16 instructions (tests of the bf16 path on a CPU
// where its products are not faster).
// On CUDA bf16 is taken as requested (no check here).
//
// What bf16 covers (model/transformer.h, mixed_linear): every linear layer and the tied LM head, forward and both
// backward products, with float32 accumulation and float32 outputs. Parameters, AdamW state, gradients as stored,
// checkpoints, the fused attention, LayerNorm, GELU, softmax, losses and reductions stay float32.
#include <string>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <nlohmann/json.hpp>

namespace spread {

struct PrecisionPlan {
  std::string requested = "fp32";   // train.precision
  std::string used = "fp32";        // what runs: "fp32" or "bf16"
  std::string reason;               // why `used` differs from `requested`, or why bf16 was accepted
  std::string cpu_flags;            // the bf16 flags found in /proc/cpuinfo ("avx512_bf16 amx_bf16", or "")
  double fp32_gflops = 0, bf16_gflops = 0;  // the timed product (0 when not timed)
  at::ScalarType matmul_dtype() const { return used == "bf16" ? at::kBFloat16 : at::kFloat; }
  std::string header_line() const;  // one line for the run header
  nlohmann::json to_json() const;   // run.json's "precision"
};

// Decides train.precision = `requested` for `device`; never throws for a CPU without bf16 (it falls back).
PrecisionPlan plan_precision(const std::string& requested, const c10::Device& device);

// The bf16 instruction-set flags of this CPU, space separated ("" when none or /proc/cpuinfo is unreadable).
std::string cpu_bf16_flags();

}  // namespace spread
