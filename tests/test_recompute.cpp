// The recomputing autograd nodes (model/recompute.h) against the plain formulas differentiated by autograd, in
// float64: values and gradients for every mask shape, with and without bias, and a whole model trained one
// step with recompute on and off.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "spread/model/recompute.h"
#include "spread/model/transformer.h"

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kB = 2, kH = 3, kT = 5, kD = 4;

// softmax(q k^T / sqrt(D) + mask) v written out: the independent reference.
torch::Tensor reference_attention(const torch::Tensor& qkv, const torch::Tensor& mask) {
  auto q = qkv[0].view({kB, kH, kT, kD}), k = qkv[1].view({kB, kH, kT, kD}), v = qkv[2].view({kB, kH, kT, kD});
  auto scores = torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(double(kD));
  if (mask.defined()) scores = scores + mask;
  auto e = torch::exp(scores - std::get<0>(scores.max(-1, true)));
  return torch::matmul(e / e.sum(-1, true), v).view({kB * kH, kT, kD});
}

torch::Tensor causal_mask() {
  return torch::full({kT, kT}, -kInf, torch::kDouble).triu(1).view({1, 1, kT, kT});
}

torch::Tensor padding_mask() {  // text 0 has 5 valid tokens, text 1 has 3
  auto pad = torch::zeros({kB, 1, 1, kT}, torch::kDouble);
  pad.index_put_({1, 0, 0, torch::indexing::Slice(3, kT)}, -kInf);
  return pad;
}

void expect_attention_matches_reference(const torch::Tensor& mask) {
  torch::manual_seed(1);
  auto qkv = torch::randn({3, kB * kH, kT, kD}, torch::kDouble).requires_grad_(true);
  auto weights = torch::randn({kB * kH, kT, kD}, torch::kDouble);
  auto y = spread::attention_core(qkv, mask, kB);
  auto grad = torch::autograd::grad({(y * weights).sum()}, {qkv})[0];
  auto y_ref = reference_attention(qkv, mask);
  auto grad_ref = torch::autograd::grad({(y_ref * weights).sum()}, {qkv})[0];
  EXPECT_TRUE(torch::allclose(y, y_ref, 1e-12, 1e-12));
  EXPECT_TRUE(torch::allclose(grad, grad_ref, 1e-12, 1e-12)) << (grad - grad_ref).abs().max().item<double>();
}

}  // namespace

TEST(Recompute, AttentionWithoutMaskMatchesTheFormula) { expect_attention_matches_reference({}); }

TEST(Recompute, AttentionWithCausalMaskMatchesTheFormula) { expect_attention_matches_reference(causal_mask()); }

TEST(Recompute, AttentionWithPaddingMaskMatchesTheFormula) { expect_attention_matches_reference(padding_mask()); }

TEST(Recompute, AttentionWithCausalAndPaddingMaskMatchesTheFormula) {
  expect_attention_matches_reference(causal_mask() + padding_mask());
}

TEST(Recompute, CausalAttentionOfTheFirstTokenIsItsValue) {
  auto qkv = torch::randn({3, kB * kH, kT, kD}, torch::kDouble);
  auto y = spread::attention_core(qkv, causal_mask(), kB);
  EXPECT_TRUE(torch::allclose(y.select(1, 0), qkv[2].select(1, 0), 1e-14, 1e-14));
}

TEST(Recompute, GeluLinearMatchesTheFormulaWithAndWithoutBias) {
  torch::manual_seed(2);
  for (bool with_bias : {true, false}) {
    auto h = torch::randn({2, 3, 8}, torch::kDouble).requires_grad_(true);
    auto w = torch::randn({5, 8}, torch::kDouble).requires_grad_(true);
    auto b = with_bias ? torch::randn({5}, torch::kDouble).requires_grad_(true) : torch::Tensor();
    auto weights = torch::randn({2, 3, 5}, torch::kDouble);
    std::vector<torch::Tensor> inputs = {h, w};
    if (with_bias) inputs.push_back(b);
    auto y = spread::gelu_linear(h, w, b);
    auto grads = torch::autograd::grad({(y * weights).sum()}, inputs);
    // GELU(x) = x * Phi(x), written out
    auto gelu = h * 0.5 * (1 + torch::erf(h / std::sqrt(2.0)));
    auto y_ref = torch::matmul(gelu, w.t());
    if (with_bias) y_ref = y_ref + b;
    auto grads_ref = torch::autograd::grad({(y_ref * weights).sum()}, inputs);
    EXPECT_TRUE(torch::allclose(y, y_ref, 1e-12, 1e-12));
    for (size_t i = 0; i < inputs.size(); ++i)
      EXPECT_TRUE(torch::allclose(grads[i], grads_ref[i], 1e-12, 1e-12)) << "input " << i << " bias " << with_bias;
  }
}

// In float32 on CPU the node runs spread's own GELU loops (an erfc approximation): against the formula in float64
// with std::erf, over inputs out to the tails (|h| up to ~20, where Phi underflows), values and gradients.
TEST(Recompute, GeluLinearInFloatMatchesTheFormulaInDouble) {
  torch::manual_seed(6);
  auto h = torch::cat({torch::randn({2, 3, 8}) * 3, torch::linspace(-20, 20, 48).view({2, 3, 8})});
  auto w = torch::randn({5, 8});
  auto weights = torch::randn({4, 3, 5});
  auto hf = h.clone().requires_grad_(true), wf = w.clone().requires_grad_(true);
  auto y = spread::gelu_linear(hf, wf, {});
  auto grads = torch::autograd::grad({(y * weights).sum()}, {hf, wf});
  auto hd = h.to(torch::kDouble).requires_grad_(true), wd = w.to(torch::kDouble).requires_grad_(true);
  auto y_ref = torch::matmul(hd * 0.5 * (1 + torch::erf(hd / std::sqrt(2.0))), wd.t());
  auto grads_ref = torch::autograd::grad({(y_ref * weights.to(torch::kDouble)).sum()}, {hd, wd});
  EXPECT_TRUE(torch::allclose(y.to(torch::kDouble), y_ref, 1e-5, 1e-5))
      << (y.to(torch::kDouble) - y_ref).abs().max().item<double>();
  for (int i = 0; i < 2; ++i)
    EXPECT_TRUE(torch::allclose(grads[i].to(torch::kDouble), grads_ref[i], 1e-5, 1e-5))
        << "input " << i << ": " << (grads[i].to(torch::kDouble) - grads_ref[i]).abs().max().item<double>();
}

// h_bias (the first MLP layer's bias, added inside the node so that its gradient is summed in the GELU-backward
// loop): values and the gradients of h, h_bias, weight and bias against the formula in float64, in float32 through
// spread's loops (150 rows: several 32-row chunks of the bias sum; 37 columns: vector remainders) and in float64
// through LibTorch's operators.
TEST(Recompute, GeluLinearWithTheInputBiasMatchesTheFormula) {
  torch::manual_seed(9);
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    auto h = (torch::randn({3, 50, 37}) * 2).to(dtype).requires_grad_(true);
    auto h_bias = torch::randn({37}).to(dtype).requires_grad_(true);
    auto w = torch::randn({11, 37}).to(dtype).requires_grad_(true);
    auto b = torch::randn({11}).to(dtype).requires_grad_(true);
    auto weights = torch::randn({3, 50, 11}).to(dtype);
    auto y = spread::gelu_linear(h, w, b, dtype, h_bias);
    auto grads = torch::autograd::grad({(y * weights).sum()}, {h, h_bias, w, b});
    std::vector<torch::Tensor> ref_inputs;
    for (const auto& t : {h, h_bias, w, b}) ref_inputs.push_back(t.detach().to(torch::kDouble).requires_grad_(true));
    auto x = ref_inputs[0] + ref_inputs[1];
    auto y_ref = torch::matmul(x * 0.5 * (1 + torch::erf(x / std::sqrt(2.0))), ref_inputs[2].t()) + ref_inputs[3];
    auto grads_ref = torch::autograd::grad({(y_ref * weights.to(torch::kDouble)).sum()}, ref_inputs);
    const double tol = dtype == torch::kFloat ? 2e-4 : 1e-12;
    EXPECT_TRUE(torch::allclose(y.to(torch::kDouble), y_ref, tol, tol))
        << (y.to(torch::kDouble) - y_ref).abs().max().item<double>();
    for (size_t i = 0; i < grads.size(); ++i)
      EXPECT_TRUE(torch::allclose(grads[i].to(torch::kDouble), grads_ref[i], tol, tol))
          << "input " << i << ": " << (grads[i].to(torch::kDouble) - grads_ref[i]).abs().max().item<double>();
  }
}

// The gated MLPs' node (SwiGLU, GeGLU): values and the gradients of h, weight and bias against the formula written
// out in float64 (SiLU a / (1 + e^-a), GELU a Phi(a) with erf), in float32 through spread's loops (150 rows: several
// chunks; 37 columns a half: vector remainders; inputs out to |a| = 20, where the activations saturate) and in
// float64 through LibTorch's operators.
TEST(Recompute, GatedLinearMatchesTheFormula) {
  torch::manual_seed(10);
  for (auto dtype : {torch::kFloat, torch::kDouble})
    for (bool silu : {true, false})
      for (bool with_bias : {true, false}) {
        auto h0 = torch::cat({torch::randn({3, 49, 74}) * 2, torch::linspace(-20, 20, 74).view({1, 1, 74}) *
                                                                  torch::ones({3, 1, 74})}, 1);
        auto h = h0.to(dtype).requires_grad_(true);
        auto w = torch::randn({11, 37}).to(dtype).requires_grad_(true);
        auto b = with_bias ? torch::randn({11}).to(dtype).requires_grad_(true) : torch::Tensor();
        auto weights = torch::randn({3, 50, 11}).to(dtype);
        std::vector<torch::Tensor> inputs = {h, w};
        if (with_bias) inputs.push_back(b);
        auto y = spread::gated_linear(h, w, b, silu, dtype);
        auto grads = torch::autograd::grad({(y * weights).sum()}, inputs);
        std::vector<torch::Tensor> ref;
        for (const auto& t : inputs) ref.push_back(t.detach().to(torch::kDouble).requires_grad_(true));
        auto a = ref[0].narrow(-1, 0, 37), up = ref[0].narrow(-1, 37, 37);
        auto act = silu ? a / (1 + torch::exp(-a)) : a * 0.5 * (1 + torch::erf(a / std::sqrt(2.0)));
        auto y_ref = torch::matmul(act * up, ref[1].t());
        if (with_bias) y_ref = y_ref + ref[2];
        auto grads_ref = torch::autograd::grad({(y_ref * weights.to(torch::kDouble)).sum()}, ref);
        const double tol = dtype == torch::kFloat ? 2e-4 : 1e-12;
        const std::string what = std::string(silu ? "SwiGLU" : "GeGLU") + (with_bias ? " with bias" : "");
        EXPECT_TRUE(torch::allclose(y.to(torch::kDouble), y_ref, tol, tol))
            << what << ": " << (y.to(torch::kDouble) - y_ref).abs().max().item<double>();
        for (size_t i = 0; i < grads.size(); ++i)
          EXPECT_TRUE(torch::allclose(grads[i].to(torch::kDouble), grads_ref[i], tol, tol))
              << what << ", input " << i << ": "
              << (grads[i].to(torch::kDouble) - grads_ref[i]).abs().max().item<double>();
      }
}

// A whole model trained one step with recompute on and off: the same loss and gradients.
void expect_recompute_changes_nothing(spread::TransformerConfig c, torch::Dtype dtype, double tol) {
  c.vocab_size = 13, c.n_layer = 2, c.n_embd = 8, c.block_size = 6;
  auto idx = torch::randint(0, 13, {2, 6}, torch::kLong);
  auto valid = torch::ones({2, 6}, torch::kBool);
  valid.index_put_({1, torch::indexing::Slice(4, 6)}, false);
  std::vector<std::vector<torch::Tensor>> grads;
  std::vector<double> losses;
  for (bool recompute : {true, false}) {
    c.recompute = recompute;
    torch::manual_seed(3);
    spread::Transformer model(c);
    model->to(dtype);
    auto out = model->forward(idx, false, true, valid);
    auto loss = (out.logits * valid.unsqueeze(-1)).pow(2).mean();
    loss.backward();
    losses.push_back(loss.item<double>());
    std::vector<torch::Tensor> g;
    for (auto& p : model->parameters()) g.push_back(p.grad().clone());
    grads.push_back(g);
  }
  EXPECT_NEAR(losses[0], losses[1], tol * std::abs(losses[0]));
  for (size_t i = 0; i < grads[0].size(); ++i)
    EXPECT_TRUE(torch::allclose(grads[0][i], grads[1][i], tol, tol))
        << "parameter " << i << ": " << (grads[0][i] - grads[1][i]).abs().max().item<double>();
}

// Causal with padding and bidirectional with padding, in float64.
TEST(Recompute, ModelGradientsAreTheSameWithAndWithoutRecompute) {
  for (bool causal : {true, false}) {
    spread::TransformerConfig c;
    c.n_head = 2, c.causal = causal;
    expect_recompute_changes_nothing(c, torch::kDouble, 1e-10);
  }
}

// The gated MLPs: with recompute, gated_linear (spread's loops in float32, LibTorch's operators in float64);
// without, the MLP as LibTorch operators. A Llama-shaped (SwiGLU, RMSNorm, rope, 2 k/v heads for 4) and a
// ModernBERT-shaped (GeGLU, local attention) model.
TEST(Recompute, GatedMlpModelGradientsAreTheSameWithAndWithoutRecompute) {
  spread::TransformerConfig llama;
  llama.n_head = 4, llama.attention.n_kv_head = 2, llama.positions.rope = true, llama.norm.rms = true,
  llama.mlp.gated = true;
  llama.mlp.silu = true, llama.mlp.width = 12, llama.bias = false;
  spread::TransformerConfig modernbert;
  modernbert.n_head = 2, modernbert.causal = false, modernbert.positions.rope = true, modernbert.mlp.gated = true;
  modernbert.mlp.width = 12, modernbert.attention.window = 2, modernbert.attention.global_every = 2;
  for (const auto& c : {llama, modernbert}) {
    expect_recompute_changes_nothing(c, torch::kDouble, 1e-10);
    expect_recompute_changes_nothing(c, torch::kFloat, 1e-4);
  }
}
