// The fused residual add + LayerNorm (model/residual_norm.h) against LibTorch's add and layer_norm in float64,
// and its wiring in the model: the fused forward equals the blocks run module by module (which bias is folded,
// which norm follows each add), with and without dropout.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <utility>
#include <vector>

#include "spread/model/residual_norm.h"
#include "spread/model/transformer.h"

namespace {

struct Inputs {
  torch::Tensor x, a, a_bias, weight, bias, g_h, g_n;
};

// Rows = 3 * 37 = 111: not a multiple of the 32-row chunks. Weight and bias away from LayerNorm's 1 and 0.
Inputs random_inputs(bool with_a_bias) {
  torch::manual_seed(11);
  const int64_t C = 48;
  Inputs in;
  in.x = torch::randn({3, 37, C}) * 2 + 0.5;
  in.a = torch::randn({3, 37, C});
  if (with_a_bias) in.a_bias = torch::randn({C});
  in.weight = torch::rand({C}) + 0.5;
  in.bias = torch::randn({C}) * 0.1;
  in.g_h = torch::randn({3, 37, C});
  in.g_n = torch::randn({3, 37, C});
  return in;
}

std::vector<torch::Tensor> leaves(const Inputs& in, torch::ScalarType dtype) {
  std::vector<torch::Tensor> out;
  for (const auto& t : {in.x, in.a, in.a_bias, in.weight, in.bias})
    out.push_back(t.defined() ? t.to(dtype).detach().requires_grad_(true) : torch::Tensor());
  return out;
}

// {h, n} from the leaves {x, a, a_bias, weight, bias}.
using Forward = std::function<std::pair<torch::Tensor, torch::Tensor>(const std::vector<torch::Tensor>&)>;

// {h, n, then the gradients of x, a, a_bias, weight, bias} of sum(h * g_h) + sum(n * g_n), in dtype.
std::vector<torch::Tensor> values_and_grads(const Inputs& in, bool use_h, torch::ScalarType dtype,
                                            const Forward& forward) {
  auto p = leaves(in, dtype);
  auto [h, n] = forward(p);
  auto loss = (n * in.g_n.to(dtype)).sum();
  if (use_h) loss = loss + (h * in.g_h.to(dtype)).sum();
  loss.backward();
  std::vector<torch::Tensor> out{h.detach(), n.detach()};
  for (const auto& t : p) out.push_back(t.defined() ? t.grad() : torch::Tensor());
  return out;
}

std::vector<torch::Tensor> fused(const Inputs& in, bool use_h, bool rms = false) {
  return values_and_grads(in, use_h, torch::kFloat, [rms](const std::vector<torch::Tensor>& p) {
    return rms ? spread::residual_norm(p[0], p[1], p[2], p[3], p[4], 1e-5, /*rms=*/true)
               : spread::residual_layer_norm(p[0], p[1], p[2], p[3], p[4], 1e-5);
  });
}

// Written out from the definitions in float64: LayerNorm by LibTorch, RMSNorm as h / sqrt(mean(h^2) + eps) * w.
std::vector<torch::Tensor> reference(const Inputs& in, bool use_h, bool rms = false) {
  return values_and_grads(in, use_h, torch::kDouble, [rms](const std::vector<torch::Tensor>& p) {
    auto h = p[2].defined() ? p[0] + p[1] + p[2] : p[0] + p[1];
    if (rms) return std::make_pair(h, h / torch::sqrt(h.pow(2).mean(-1, true) + 1e-5) * p[3]);
    return std::make_pair(h, torch::layer_norm(h, {h.size(-1)}, p[3], p[4], 1e-5));
  });
}

void expect_close(const std::vector<torch::Tensor>& got, const std::vector<torch::Tensor>& expected) {
  const char* names[] = {"h", "n", "d x", "d a", "d a_bias", "d weight", "d bias"};
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].defined(), expected[i].defined()) << names[i];
    if (!got[i].defined()) continue;
    ASSERT_EQ(got[i].scalar_type(), torch::kFloat) << names[i];
    // float32 rounding relative to the tensor's scale (the column sums add 111 rows).
    const double scale = expected[i].abs().max().item<double>();
    const double err = (got[i].to(torch::kDouble) - expected[i]).abs().max().item<double>();
    EXPECT_LT(err, 2e-6 * scale) << names[i] << ": scale " << scale;
  }
}

}  // namespace

TEST(ResidualLayerNorm, MatchesAddThenLayerNormWithBias) {
  const auto in = random_inputs(/*with_a_bias=*/true);
  expect_close(fused(in, true), reference(in, true));
}

TEST(ResidualLayerNorm, MatchesAddThenLayerNormWithoutBias) {
  const auto in = random_inputs(/*with_a_bias=*/false);
  expect_close(fused(in, true), reference(in, true));
}

TEST(ResidualLayerNorm, MatchesAddThenLayerNormWithoutANormBias) {  // ModernBERT's LayerNorm
  auto in = random_inputs(/*with_a_bias=*/true);
  in.bias = torch::Tensor();
  expect_close(fused(in, true), reference(in, true));
}

TEST(ResidualLayerNorm, RmsNormMatchesItsDefinition) {
  auto in = random_inputs(/*with_a_bias=*/true);
  in.bias = torch::Tensor();
  expect_close(fused(in, true, /*rms=*/true), reference(in, true, /*rms=*/true));
  in.a_bias = torch::Tensor();
  expect_close(fused(in, false, /*rms=*/true), reference(in, false, /*rms=*/true));
  auto x = torch::randn({2, 3, 8});
  EXPECT_THROW(spread::residual_norm(x, x, {}, torch::ones({8}), torch::zeros({8}), 1e-5, true), c10::Error);
}

TEST(ResidualLayerNorm, UnusedResidualOutputGetsNoGradient) {
  // The last block's sum reaches only the final norm unless hidden states are used: h's gradient is zero.
  const auto in = random_inputs(/*with_a_bias=*/true);
  expect_close(fused(in, false), reference(in, false));
}

TEST(ResidualLayerNorm, RejectsMismatchedShapes) {
  auto x = torch::randn({2, 4, 8}), w = torch::ones({8}), b = torch::zeros({8});
  EXPECT_THROW(spread::residual_layer_norm(x, torch::randn({2, 4, 7}), {}, w, b, 1e-5), c10::Error);
  EXPECT_THROW(spread::residual_layer_norm(x, torch::randn({2, 4, 8}), torch::zeros({7}), w, b, 1e-5), c10::Error);
}

namespace {

spread::TransformerConfig wiring_config(double dropout, bool llama) {
  spread::TransformerConfig cfg;
  if (llama) {  // rope, RMSNorm, SwiGLU, two query heads per k/v head, no biases
    cfg.positions.rope = cfg.norm.rms = cfg.mlp.gated = cfg.mlp.silu = true;
    cfg.attention.n_kv_head = 1;
    cfg.bias = false;
  }
  cfg.vocab_size = 23;
  cfg.n_layer = 3;
  cfg.n_head = 2;
  cfg.n_embd = 32;
  cfg.block_size = 16;
  cfg.dropout = dropout;
  return cfg;
}

// The logits and every parameter's gradient of sum(logits * probe), with the model's own forward or module by
// module through Block::forward and ln_f (no fused node), the dropout masks drawn from the same seed.
std::pair<torch::Tensor, std::vector<torch::Tensor>> logits_and_grads(spread::Transformer& model, bool module_by_module,
                                                                      double dropout, const torch::Tensor& ids,
                                                                      const torch::Tensor& probe) {
  model->zero_grad();
  torch::manual_seed(99);
  torch::Tensor logits;
  if (module_by_module) {
    const int64_t T = ids.size(1);
    auto x = model->wpe.is_empty() ? model->wte->forward(ids)
                                   : model->wte->forward(ids) + model->wpe->weight.narrow(0, 0, T);
    if (dropout > 0) x = torch::dropout(x, dropout, /*train=*/true);
    const auto mask = model->blocks[0]->as<spread::Block>()->attn->attention_mask({}, T);
    for (const auto& block : *model->blocks) x = block->as<spread::Block>()->forward(x, mask);
    logits = torch::matmul(model->ln_f->forward(x), model->wte->weight.t());
  } else {
    logits = model->forward(ids).logits;
  }
  (logits * probe).sum().backward();
  std::vector<torch::Tensor> grads;
  for (const auto& p : model->parameters()) grads.push_back(p.grad().clone());
  return {logits.detach(), grads};
}

void expect_fused_equals_module_by_module(double dropout, bool llama = false) {
  torch::manual_seed(3);
  spread::Transformer model(wiring_config(dropout, llama));
  {  // LayerNorm weights and biases away from 1 and 0, so that using the wrong norm shows
    torch::NoGradGuard no_grad;
    for (auto& item : model->named_parameters())
      if (item.key().find("ln") != std::string::npos || item.key().find("bias") != std::string::npos)
        item.value().add_(torch::randn_like(item.value()) * 0.3);
  }
  model->train();
  const auto ids = torch::randint(0, 23, {2, 16}, torch::kLong);
  const auto probe = torch::randn({2, 16, 23});
  const auto [fused_logits, fused_grads] = logits_and_grads(model, false, dropout, ids, probe);
  const auto [plain_logits, plain_grads] = logits_and_grads(model, true, dropout, ids, probe);
  EXPECT_TRUE(torch::allclose(fused_logits, plain_logits, 1e-5, 1e-5));
  const auto names = model->named_parameters().keys();
  ASSERT_EQ(fused_grads.size(), plain_grads.size());
  for (size_t i = 0; i < fused_grads.size(); ++i)
    EXPECT_TRUE(torch::allclose(fused_grads[i], plain_grads[i], 1e-4, 1e-5)) << names[i];
}

}  // namespace

TEST(ResidualLayerNorm, ModelEqualsItsBlocksModuleByModule) { expect_fused_equals_module_by_module(0.0); }

TEST(ResidualLayerNorm, LlamaStyleModelEqualsItsBlocksModuleByModule) {  // the fused RMSNorm where each add is
  expect_fused_equals_module_by_module(0.0, /*llama=*/true);
}

TEST(ResidualLayerNorm, ModelEqualsItsBlocksModuleByModuleWithDropout) {
  // With dropout on a branch's output the bias stays in the branch (dropout(W y + b), not dropout(W y) + b).
  expect_fused_equals_module_by_module(0.1);
}
