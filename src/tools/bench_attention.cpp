// Micro benchmark of causal self-attention, forward + backward, from the QKV projection's output [B, T, 3C] to
// y = [B, T, C]: the fused CPU kernel (model/attention.h) against the LibTorch-operator path the model used
// before (heads split by a copy, model/recompute.h's attention node, heads merged by a copy). The two alternate
// (A B B A ...) in one process, so drift of a shared machine cancels; prints the median of per-pair ratios.
// --against full-scores compares the fused kernel as the model runs it (causal row blocks that skip the masked
// scores) with the same kernel computing every T x T score under the causal mask.
// --against fp32-products compares the fused kernel with bf16 products (the model's bf16 precision) with the same
// kernel in float32 products.
// --window W >= 0 benchmarks bidirectional local attention instead (ModernBERT's local layers: keys within W either
// way): the kernel's band row blocks against unfused (LibTorch operators under the band mask) or full-scores (the
// kernel computing every score under the band mask, as a T x T mask costs).
//   bench_attention [--batch 12] [--heads 4] [--tokens 64] [--head-dim 32] [--pairs 40] [--threads 0]
//                   [--dropout 0] [--against unfused|full-scores|fp32-products] [--window -1]
// Defaults are shape A of bench/bench_lm.sh; shape B is --batch 8 --heads 6 --tokens 256 --head-dim 64.
#include <cxxopts.hpp>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>

#include "spread/model/attention.h"
#include "spread/runtime/allocator.h"
#include "spread/runtime/blas.h"
#include "alternate.h"

namespace {

using AttentionFn = std::function<torch::Tensor(const torch::Tensor&)>;

double forward_backward_ms(const AttentionFn& attention, const torch::Tensor& qkv, const torch::Tensor& grad_y) {
  qkv.mutable_grad() = torch::Tensor();
  const auto t0 = std::chrono::steady_clock::now();
  attention(qkv).backward(grad_y);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  spread::select_blas_core(argv);  // as the trainer does: the right OpenBLAS kernels and thread split
  spread::tune_allocator();
  cxxopts::Options options("bench_attention", "fused vs unfused causal attention, forward + backward");
  options.add_options()("batch", "B", cxxopts::value<int64_t>()->default_value("12"))(
      "heads", "H", cxxopts::value<int64_t>()->default_value("4"))(
      "tokens", "T", cxxopts::value<int64_t>()->default_value("64"))(
      "head-dim", "D", cxxopts::value<int64_t>()->default_value("32"))(
      "pairs", "alternating pairs", cxxopts::value<int64_t>()->default_value("40"))(
      "dropout", "attention dropout on both paths", cxxopts::value<double>()->default_value("0"))(
      "against", "unfused (LibTorch operators), full-scores (the fused kernel without causal row blocks) or "
      "fp32-products (the fused kernel in float32, against its bf16 products)",
      cxxopts::value<std::string>()->default_value("unfused"))(
      "threads", "0 = the trainer's default", cxxopts::value<int64_t>()->default_value("0"))(
      "window", ">= 0: bidirectional local attention of this half width", cxxopts::value<int64_t>()->default_value("-1"))(
      "h,help", "help");
  const auto args = options.parse(argc, argv);
  if (args.count("help")) {
    std::printf("%s\n", options.help().c_str());
    return 0;
  }
  const int64_t B = args["batch"].as<int64_t>(), H = args["heads"].as<int64_t>(), T = args["tokens"].as<int64_t>(),
                D = args["head-dim"].as<int64_t>(), pairs = args["pairs"].as<int64_t>();
  const double dropout = args["dropout"].as<double>();
  const spread::ThreadPlan threads = spread::apply_threads(args["threads"].as<int64_t>());
  torch::manual_seed(0);
  auto qkv = torch::randn({B, T, 3 * H * D}).requires_grad_(true);
  auto grad_y = torch::randn({B, T, H * D});
  const int64_t window = args["window"].as<int64_t>();
  const bool causal = window < 0;
  auto mask = causal ? torch::full({T, T}, -std::numeric_limits<float>::infinity()).triu(1).view({1, 1, T, T})
                     : spread::window_mask(T, window, torch::kFloat);
  if (!spread::fused_attention_supported(qkv)) {
    std::fprintf(stderr, "bench_attention: no fused kernel here (no BLAS sgemm_ in the process)\n");
    return 2;
  }
  const std::string against = args["against"].as<std::string>();
  if (against != "unfused" && against != "full-scores" && against != "fp32-products") {
    std::fprintf(stderr, "bench_attention: --against must be unfused, full-scores or fp32-products, got '%s'\n",
                 against.c_str());
    return 2;
  }
  if (against == "fp32-products" && !spread::fused_attention_has_bf16_products()) {
    std::fprintf(stderr, "bench_attention: no bf16 GEMM in this process (dnnl_gemm_bf16bf16f32 or "
                         "cblas_gemm_bf16bf16f32), so no bf16 products to compare\n");
    return 2;
  }
  const auto fused_with = [&](at::ScalarType products) {
    return [&, products](const torch::Tensor& x) {
      return causal ? spread::fused_attention(x, mask, H, dropout, /*causal=*/true, -1, products)
                    : spread::fused_attention(x, {}, H, dropout, /*causal=*/false, window, products);
    };
  };
  const AttentionFn fused = fused_with(against == "fp32-products" ? torch::kBFloat16 : torch::kFloat);
  const AttentionFn fused_fp32 = fused_with(torch::kFloat);
  const AttentionFn unfused = [&](const torch::Tensor& x) {
    if (against == "fp32-products") return fused_fp32(x);
    if (against == "full-scores") return spread::fused_attention(x, mask, H, dropout, /*causal=*/false);
    return spread::unfused_attention(x, mask, H, dropout, /*recompute=*/true);
  };
  for (int i = 0; i < 3; ++i) forward_backward_ms(fused, qkv, grad_y), forward_backward_ms(unfused, qkv, grad_y);
  const auto t = spread::bench::alternate_pairs(
      pairs, [&] { return forward_backward_ms(fused, qkv, grad_y); },
      [&] { return forward_backward_ms(unfused, qkv, grad_y); });
  const double f = t.median_a(), u = t.median_b(), speedup = t.median_ratio();
  const std::string kind = causal ? "causal" : "window " + std::to_string(window);
  std::printf("%s attention B=%lld H=%lld T=%lld D=%lld dropout %.2f, threads %d intra-op / %d BLAS, %lld pairs: forward+backward "
              "median fused %.3f ms, %s %.3f ms, %s/fused %.2fx (median of per-pair ratios)\n",
              kind.c_str(), static_cast<long long>(B), static_cast<long long>(H), static_cast<long long>(T),
              static_cast<long long>(D), dropout, threads.intra_op, threads.blas, static_cast<long long>(pairs), f,
              against.c_str(), u, against.c_str(), speedup);
  std::printf("{\"fused_ms\": %.4f, \"unfused_ms\": %.4f, \"speedup\": %.4f, \"pairs\": %lld}\n", f, u, speedup,
              static_cast<long long>(pairs));
  return 0;
}
