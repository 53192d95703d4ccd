// Micro benchmark of the transformer's forward + backward (LM loss on the tied head) as the model runs it, each
// residual add fused with the LayerNorm after it and the branch's output bias (model/residual_norm.h), against the
// same weights run module by module through Block::forward and ln_f (the add, the bias and the norm as separate
// LibTorch operators: the model's path before the fusion). The two alternate (A B B A ...) in one process, so
// drift of a shared machine cancels; prints the median of per-pair ratios. No optimizer step.
//   bench_block [--batch 8] [--layers 6] [--heads 6] [--width 384] [--tokens 256] [--vocab 65] [--pairs 20]
//               [--threads 0]
// Defaults are shape B of bench/bench_lm.sh (char vocabulary of tiny shakespeare, dropout 0).
#include <cxxopts.hpp>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <functional>

#include "spread/model/transformer.h"
#include "spread/runtime/allocator.h"
#include "spread/runtime/blas.h"
#include "alternate.h"

namespace {

using LogitsFn = std::function<torch::Tensor()>;

double forward_backward_ms(spread::Transformer& model, const LogitsFn& logits, const torch::Tensor& targets) {
  for (auto& p : model->parameters()) p.mutable_grad() = torch::Tensor();
  const auto t0 = std::chrono::steady_clock::now();
  spread::TransformerImpl::lm_loss(logits(), targets).backward();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  spread::select_blas_core(argv);  // as the trainer does: the right OpenBLAS kernels and thread split
  spread::tune_allocator();
  cxxopts::Options options("bench_block", "fused residual LayerNorm vs module by module, forward + backward");
  options.add_options()("batch", "B", cxxopts::value<int64_t>()->default_value("8"))(
      "layers", "blocks", cxxopts::value<int64_t>()->default_value("6"))(
      "heads", "heads", cxxopts::value<int64_t>()->default_value("6"))(
      "width", "C", cxxopts::value<int64_t>()->default_value("384"))(
      "tokens", "T", cxxopts::value<int64_t>()->default_value("256"))(
      "vocab", "V", cxxopts::value<int64_t>()->default_value("65"))(
      "pairs", "alternating pairs", cxxopts::value<int64_t>()->default_value("20"))(
      "threads", "0 = the trainer's default", cxxopts::value<int64_t>()->default_value("0"))("h,help", "help");
  const auto args = options.parse(argc, argv);
  if (args.count("help")) {
    std::printf("%s\n", options.help().c_str());
    return 0;
  }
  spread::TransformerConfig cfg;
  cfg.n_layer = args["layers"].as<int64_t>();
  cfg.n_head = args["heads"].as<int64_t>();
  cfg.n_embd = args["width"].as<int64_t>();
  cfg.block_size = args["tokens"].as<int64_t>();
  cfg.vocab_size = args["vocab"].as<int64_t>();
  cfg.recompute = true;  // the trainer's default
  const int64_t B = args["batch"].as<int64_t>(), T = cfg.block_size, pairs = args["pairs"].as<int64_t>();
  const spread::ThreadPlan threads = spread::apply_threads(args["threads"].as<int64_t>());
  torch::manual_seed(0);
  spread::Transformer model(cfg);
  model->train();
  const auto ids = torch::randint(0, cfg.vocab_size, {B, T}, torch::kLong);
  const auto targets = torch::randint(0, cfg.vocab_size, {B, T}, torch::kLong);
  const LogitsFn fused = [&] { return model->forward(ids).logits; };
  const LogitsFn module_by_module = [&] {
    auto x = model->wte->forward(ids) + model->wpe->weight.narrow(0, 0, T);
    const auto mask = model->blocks[0]->as<spread::Block>()->attn->attention_mask({}, T);
    for (const auto& block : *model->blocks) x = block->as<spread::Block>()->forward(x, mask);
    return spread::mixed_linear(model->ln_f->forward(x), model->wte->weight, {}, at::kFloat, model->is_training());
  };
  for (int i = 0; i < 2; ++i)
    forward_backward_ms(model, fused, targets), forward_backward_ms(model, module_by_module, targets);
  const auto t = spread::bench::alternate_pairs(
      pairs, [&] { return forward_backward_ms(model, fused, targets); },
      [&] { return forward_backward_ms(model, module_by_module, targets); });
  const double f = t.median_a(), u = t.median_b(), speedup = t.median_ratio();
  std::printf("model B=%lld T=%lld layers %lld width %lld, threads %d intra-op / %d BLAS, %lld pairs: forward+backward "
              "median fused %.2f ms, module by module %.2f ms, ratio %.4fx (median of per-pair ratios)\n",
              static_cast<long long>(B), static_cast<long long>(T), static_cast<long long>(cfg.n_layer),
              static_cast<long long>(cfg.n_embd), threads.intra_op, threads.blas, static_cast<long long>(pairs), f, u,
              speedup);
  std::printf("{\"fused_ms\": %.4f, \"module_by_module_ms\": %.4f, \"speedup\": %.4f, \"pairs\": %lld}\n", f, u,
              speedup, static_cast<long long>(pairs));
  return 0;
}
