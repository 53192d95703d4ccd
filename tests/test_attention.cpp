// The fused CPU attention (model/attention.h) against softmax(q k^T / sqrt(D) + mask) v written out with LibTorch
// operators in float64 and differentiated by autograd: values and gradients for every mask shape the model
// builds, odd sizes, rows long enough for the vector loops, a non-contiguous mask, scores far apart (the kernel's
// own exp), a fully masked row. Where LibTorch keeps its BLAS private the kernel is absent and these tests skip;
// with Debian's LibTorch (SPREAD_EXPECT_FUSED_ATTENTION) the first test fails instead.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "spread/model/attention.h"
#include "spread/runtime/precision.h"

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kB = 2, kH = 3, kT = 7, kD = 5, kC = kH * kD;

// The independent reference, on [B, T, 3C] (layout [q | k | v]) -> [B, T, C].
// noise (optional): [B*H, T, T] factors multiplying the probabilities (attention dropout).
torch::Tensor reference_attention(const torch::Tensor& qkv, const torch::Tensor& mask, int64_t n_head,
                                  const torch::Tensor& noise = {}) {
  const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3, D = C / n_head;
  auto split_heads = [&](const torch::Tensor& x) { return x.view({B, T, n_head, D}).transpose(1, 2); };
  auto parts = qkv.split(C, -1);
  auto q = split_heads(parts[0]), k = split_heads(parts[1]), v = split_heads(parts[2]);
  auto scores = torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(double(D));
  if (mask.defined()) scores = scores + mask;
  auto e = torch::exp(scores - std::get<0>(scores.max(-1, true)));
  auto probs = e / e.sum(-1, true);
  if (noise.defined()) probs = probs * noise.view({B, n_head, T, T});
  return torch::matmul(probs, v).transpose(1, 2).reshape({B, T, C});
}

torch::Tensor causal_mask(int64_t T = kT) { return torch::full({T, T}, -kInf).triu(1).view({1, 1, T, T}); }

torch::Tensor padding_mask() {  // text 0 has 7 valid tokens, text 1 has 4: [B, 1, 1, T], as attention_mask() builds
  auto pad = torch::zeros({kB, 1, 1, kT});
  pad.index_put_({1, 0, 0, torch::indexing::Slice(4, kT)}, -kInf);
  return pad;
}

struct Result {
  torch::Tensor y, grad;
};

Result run(const torch::Tensor& qkv, const torch::Tensor& weights, bool fused, const torch::Tensor& mask,
           int64_t n_head = kH, bool causal = false, int64_t window = -1) {
  auto x = qkv.detach().clone().requires_grad_(true);
  auto y = fused ? spread::fused_attention(x, mask, n_head, 0.0, causal, window) : reference_attention(x, mask, n_head);
  auto grad = torch::autograd::grad({(y * weights).sum()}, {x})[0];
  return {y.detach(), grad};
}

// kernel_causal: the kernel runs with causal = true (its row blocks) and reference_mask, the reference's mask,
// adds what that promises (default: the same mask as the kernel's).
// kernel_window >= 0: the kernel's local-attention window (the reference mask must then say it).
void expect_matches_reference(const torch::Tensor& mask, double input_scale = 1.0, int64_t T = kT,
                              int64_t n_head = kH, int64_t head_dim = kD, bool kernel_causal = false,
                              const c10::optional<torch::Tensor>& reference_mask = c10::nullopt,
                              int64_t kernel_window = -1) {
  torch::manual_seed(3);
  const int64_t C = n_head * head_dim;
  auto qkv = torch::randn({kB, T, 3 * C}) * input_scale;
  auto weights = torch::randn({kB, T, C});
  auto fused = run(qkv, weights, true, mask, n_head, kernel_causal, kernel_window);
  const auto ref_mask = reference_mask.value_or(mask);
  auto ref = run(qkv.to(torch::kDouble), weights.to(torch::kDouble), false,
                 ref_mask.defined() ? ref_mask.to(torch::kDouble) : ref_mask, n_head);
  const double tol = 2e-5 * input_scale * input_scale;
  EXPECT_TRUE(torch::allclose(fused.y.to(torch::kDouble), ref.y, tol, tol))
      << (fused.y.to(torch::kDouble) - ref.y).abs().max().item<double>();
  EXPECT_TRUE(torch::allclose(fused.grad.to(torch::kDouble), ref.grad, tol, tol))
      << (fused.grad.to(torch::kDouble) - ref.grad).abs().max().item<double>();
}

// y and dL/dqkv of L = sum(y * weights) through one attention function.
template <class Attention>
Result differentiate(const torch::Tensor& qkv, const torch::Tensor& weights, Attention attention) {
  auto x = qkv.detach().clone().requires_grad_(true);
  auto y = attention(x);
  return {y.detach(), torch::autograd::grad({(y * weights).sum()}, {x})[0]};
}

bool fused_available() { return spread::fused_attention_supported(torch::zeros({1, 1, 3})); }

class FusedAttention : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fused_available()) GTEST_SKIP() << "LibTorch's BLAS is not visible here: the model uses the unfused path";
  }
};

TEST(FusedAttentionBuild, IsAvailableWhereLibTorchUsesTheSystemBlas) {
#if SPREAD_EXPECT_FUSED_ATTENTION
  EXPECT_TRUE(fused_available()) << "no working sgemm_ in the process";
#endif
  EXPECT_FALSE(spread::fused_attention_supported(torch::zeros({1, 1, 3}, torch::kDouble)));
}

TEST_F(FusedAttention, WithoutMaskMatchesTheFormula) { expect_matches_reference({}); }

TEST_F(FusedAttention, CausalMatchesTheFormula) { expect_matches_reference(causal_mask()); }

TEST_F(FusedAttention, PaddingRowMaskMatchesTheFormula) { expect_matches_reference(padding_mask()); }

TEST_F(FusedAttention, CausalAndPaddingMatchesTheFormula) { expect_matches_reference(causal_mask() + padding_mask()); }

TEST_F(FusedAttention, NarrowedMaskOfALongerBlockMatchesTheFormula) {
  // The model narrows its [block, block] bias to T: rows keep the longer stride.
  auto big = torch::full({kT + 4, kT + 4}, -kInf).triu(1);
  auto mask = big.narrow(0, 0, kT).narrow(1, 0, kT).view({1, 1, kT, kT});
  ASSERT_FALSE(mask.is_contiguous());
  expect_matches_reference(mask);
}

TEST_F(FusedAttention, RowsLongerThanAVectorMatchTheFormula) {
  // T = 41: the row loops run full AVX-512 / AVX2 vectors plus a remainder.
  expect_matches_reference(causal_mask(41), 1.0, 41, 2, 16);
  expect_matches_reference({}, 2.0, 41, 2, 16);
}

// causal = true: rows in blocks of 32 (float32 products) whose key columns stop at the block's last row (T = 150:
// four blocks of 32 and one of 22 rows), the rest of each row never computed.
TEST_F(FusedAttention, CausalRowBlocksMatchTheFormula) {
  const int64_t T = 150;
  expect_matches_reference(causal_mask(T), 1.0, T, 2, 8, /*kernel_causal=*/true);
  // The kernel applies causality itself: without a mask it equals the formula with the causal mask.
  expect_matches_reference({}, 1.0, T, 2, 8, /*kernel_causal=*/true, causal_mask(T));
  auto pad = torch::zeros({kB, 1, 1, T});  // text 1: 100 valid keys, so its last rows see padding only past 100
  pad.index_put_({1, 0, 0, torch::indexing::Slice(100, T)}, -kInf);
  expect_matches_reference(causal_mask(T) + pad, 1.0, T, 2, 8, /*kernel_causal=*/true);
  expect_matches_reference(pad, 1.0, T, 2, 8, /*kernel_causal=*/true, causal_mask(T) + pad);
  expect_matches_reference(causal_mask(32), 1.0, 32, 2, 8, /*kernel_causal=*/true);  // exactly one block
  expect_matches_reference(causal_mask(64), 1.0, 64, 2, 8, /*kernel_causal=*/true);  // exactly two
}

// The band |t - s| <= w written out entry by entry (and t >= s with causal): the reference's mask for a window.
torch::Tensor band_mask(int64_t T, int64_t w, bool causal = false) {
  auto m = torch::zeros({T, T});
  auto a = m.accessor<float, 2>();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t s = 0; s < T; ++s)
      if (std::abs(t - s) > w || (causal && s > t)) a[t][s] = -std::numeric_limits<float>::infinity();
  return m.view({1, 1, T, T});
}

// A window: row blocks of 32 whose key columns span the band of their rows only (T = 150: blocks starting at 0, 32,
// 64, 96 and 128; windows narrower than a block, wider than one, 0 = the diagonal only, past the sequence; one short
// block with an even window), with padding (text 1: 100 valid keys, so its last rows see a few valid keys at the
// band's left edge), and causal with a window (a decoder's sliding window).
TEST_F(FusedAttention, WindowRowBlocksMatchTheFormula) {
  const int64_t T = 150;
  for (int64_t w : {3, 64, 100, 0, 200}) {
    SCOPED_TRACE(w);
    expect_matches_reference({}, 1.0, T, 2, 8, false, band_mask(T, w), w);
  }
  expect_matches_reference({}, 1.0, 29, 3, 5, false, band_mask(29, 4), 4);  // one short block
  auto pad = torch::zeros({kB, 1, 1, T});
  pad.index_put_({1, 0, 0, torch::indexing::Slice(100, T)}, -kInf);
  expect_matches_reference(pad, 1.0, T, 2, 8, false, band_mask(T, 64) + pad, 64);
  expect_matches_reference({}, 1.0, T, 2, 8, true, band_mask(T, 20, /*causal=*/true), 20);
}

// Attention dropout at p = 0.25 (T = 130, 2 heads of 8): the kernel with `causal` and `window` against the formula
// with `reference_mask` and the [B*H, T, T] noise the kernel draws, as at::dropout does, from the same seed.
void expect_dropout_matches_reference(bool causal, int64_t window, const torch::Tensor& reference_mask) {
  const int64_t T = 130, H = 2, D = 8, C = H * D;
  const double p = 0.25;
  torch::manual_seed(8);
  auto qkv = torch::randn({kB, T, 3 * C});
  auto weights = torch::randn({kB, T, C});
  const auto kernel_mask = causal ? causal_mask(T) : torch::Tensor();
  torch::manual_seed(13);
  auto fused = differentiate(qkv, weights, [&](const torch::Tensor& x) {
    return spread::fused_attention(x, kernel_mask, H, p, causal, window);
  });
  torch::manual_seed(13);
  auto noise = torch::empty({kB * H, T, T}).bernoulli_(1 - p).div_(1 - p).to(torch::kDouble);
  auto ref = differentiate(qkv.to(torch::kDouble), weights.to(torch::kDouble), [&](const torch::Tensor& x) {
    return reference_attention(x, reference_mask.to(torch::kDouble), H, noise);
  });
  EXPECT_TRUE(torch::allclose(fused.y.to(torch::kDouble), ref.y, 2e-5, 2e-5))
      << (fused.y.to(torch::kDouble) - ref.y).abs().max().item<double>();
  EXPECT_TRUE(torch::allclose(fused.grad.to(torch::kDouble), ref.grad, 2e-5, 2e-5))
      << (fused.grad.to(torch::kDouble) - ref.grad).abs().max().item<double>();
}

TEST_F(FusedAttention, WindowWithDropoutMatchesTheFormula) {
  expect_dropout_matches_reference(/*causal=*/false, 17, band_mask(130, 17));
}

// The unfused path's window mask against the entry-by-entry band.
TEST(WindowMask, IsTheBand) {
  for (int64_t w : {0, 1, 5, 12})
    EXPECT_TRUE(torch::equal(spread::window_mask(9, w, torch::kFloat), band_mask(9, w))) << w;
}

TEST_F(FusedAttention, CausalRowBlocksWithDropoutMatchTheFormula) {
  expect_dropout_matches_reference(/*causal=*/true, -1, causal_mask(130));
}

TEST_F(FusedAttention, ScoresFarApartMatchTheFormula) {
  // Inputs x4 spread the scores over tens of units: the kernel's exp meets arguments down to its -87 cutoff.
  expect_matches_reference(causal_mask(), 4.0);
}

TEST_F(FusedAttention, CausalFirstTokenIsItsValueAndFutureTokensDoNotLeak) {
  torch::manual_seed(4);
  auto qkv = torch::randn({kB, kT, 3 * kC});
  auto y = spread::fused_attention(qkv, causal_mask(), kH);
  EXPECT_TRUE(torch::equal(y.select(1, 0), qkv.select(1, 0).narrow(-1, 2 * kC, kC)));
  auto changed = qkv.clone();
  changed.select(1, kT - 1).add_(10.0);
  auto y2 = spread::fused_attention(changed, causal_mask(), kH);
  EXPECT_TRUE(torch::equal(y.narrow(1, 0, kT - 1), y2.narrow(1, 0, kT - 1)));  // bitwise: masked weights are 0
}

// A query with nothing to attend to (padding outside every valid key's window, or a text without valid keys) gives
// 0 and passes no gradient, so no NaN reaches the next layer's values; the other rows are as the formula says.
TEST_F(FusedAttention, FullyMaskedRowIsZeroWithoutGradient) {
  auto mask = torch::zeros({kB, 1, 1, kT});
  mask.select(0, 1).fill_(-kInf);  // text 1 has no valid key
  torch::manual_seed(4);
  auto qkv = torch::randn({kB, kT, 3 * kC}).requires_grad_(true);
  auto y = spread::fused_attention(qkv, mask, kH);
  EXPECT_TRUE(torch::equal(y.select(0, 1), torch::zeros({kT, kC})));
  EXPECT_TRUE(torch::allclose(y.select(0, 0), reference_attention(qkv, {}, kH).select(0, 0), 1e-5, 1e-6));
  auto grad = torch::autograd::grad({(y * y).sum()}, {qkv})[0];
  EXPECT_TRUE(grad.isfinite().all().item<bool>());
  EXPECT_TRUE(torch::equal(grad.select(0, 1), torch::zeros({kT, 3 * kC})));
  // With a window, text 1's padding rows past its valid keys' windows see nothing: zero, and text 1's valid rows
  // stay as the formula says.
  const int64_t T = 150, w = 5;
  auto pad = torch::zeros({kB, 1, 1, T});
  pad.index_put_({1, 0, 0, torch::indexing::Slice(20, T)}, -kInf);
  auto x = torch::randn({kB, T, 3 * kC});
  auto yw = spread::fused_attention(x, pad, kH, 0.0, false, w);
  auto ref = reference_attention(x.to(torch::kDouble), (pad + band_mask(T, w)).to(torch::kDouble), kH);
  EXPECT_TRUE(torch::allclose(yw[1].narrow(0, 0, 20 + w).to(torch::kDouble), ref[1].narrow(0, 0, 20 + w), 1e-5, 1e-6));
  EXPECT_TRUE(torch::equal(yw[1].narrow(0, 20 + w, T - 20 - w), torch::zeros({T - 20 - w, kC})));
}

TEST_F(FusedAttention, MatchesTheUnfusedPathInFloat) {
  torch::manual_seed(5);
  auto qkv = torch::randn({kB, kT, 3 * kC});
  auto weights = torch::randn({kB, kT, kC});
  for (bool recompute : {true, false}) {
    auto x = qkv.clone().requires_grad_(true);
    auto y = spread::unfused_attention(x, causal_mask(), kH, 0.0, recompute);
    auto grad = torch::autograd::grad({(y * weights).sum()}, {x})[0];
    auto fused = run(qkv, weights, true, causal_mask());
    EXPECT_TRUE(torch::allclose(fused.y, y, 1e-5, 1e-6)) << "recompute " << recompute;
    EXPECT_TRUE(torch::allclose(fused.grad, grad, 1e-5, 1e-6)) << "recompute " << recompute;
  }
}

TEST_F(FusedAttention, DropoutMatchesTheFormulaWithTheNoiseOfTheGenerator) {
  // The noise at::dropout draws on [B*H, T, T] probabilities: bernoulli(1 - p) / (1 - p) from the default generator.
  // The reference draws it itself after the same seed and applies it in float64; values and gradients must agree.
  const double p = 0.3;
  for (const auto& mask : {torch::Tensor(), causal_mask() + padding_mask()}) {
    torch::manual_seed(6);
    auto qkv = torch::randn({kB, kT, 3 * kC});
    auto weights = torch::randn({kB, kT, kC});
    torch::manual_seed(11);
    auto fused = differentiate(qkv, weights, [&](const torch::Tensor& x) {
      return spread::fused_attention(x, mask, kH, p);
    });
    torch::manual_seed(11);
    auto noise = torch::empty({kB * kH, kT, kT}).bernoulli_(1 - p).div_(1 - p).to(torch::kDouble);
    auto ref = differentiate(qkv.to(torch::kDouble), weights.to(torch::kDouble), [&](const torch::Tensor& x) {
      return reference_attention(x, mask.defined() ? mask.to(torch::kDouble) : mask, kH, noise);
    });
    auto plain = run(qkv, weights, true, mask);
    EXPECT_FALSE(torch::allclose(plain.y, fused.y, 1e-3, 1e-3)) << "dropout must change the output";
    const double tol = 2e-5;
    EXPECT_TRUE(torch::allclose(fused.y.to(torch::kDouble), ref.y, tol, tol))
        << (fused.y.to(torch::kDouble) - ref.y).abs().max().item<double>();
    EXPECT_TRUE(torch::allclose(fused.grad.to(torch::kDouble), ref.grad, tol, tol))
        << (fused.grad.to(torch::kDouble) - ref.grad).abs().max().item<double>();
  }
}

TEST_F(FusedAttention, DropoutMatchesTheUnfusedPathOnTheSameGeneratorState) {
  // Which path runs must not change a run's numbers: the same seed gives the same masks on both.
  torch::manual_seed(7);
  auto qkv = torch::randn({kB, kT, 3 * kC});
  auto weights = torch::randn({kB, kT, kC});
  torch::manual_seed(12);
  auto fused = differentiate(qkv, weights, [&](const torch::Tensor& x) {
    return spread::fused_attention(x, causal_mask(), kH, 0.2);
  });
  torch::manual_seed(12);
  auto unfused = differentiate(qkv, weights, [&](const torch::Tensor& x) {
    return spread::unfused_attention(x, causal_mask(), kH, 0.2, /*recompute=*/true);
  });
  EXPECT_TRUE(torch::allclose(fused.y, unfused.y, 1e-5, 1e-6)) << (fused.y - unfused.y).abs().max().item<double>();
  EXPECT_TRUE(torch::allclose(fused.grad, unfused.grad, 1e-5, 1e-6));
}

TEST(AttentionDropoutNoise, KeepsOneMinusPOfTheEntriesScaledByItsInverse) {
  torch::manual_seed(8);
  const double p = 0.25;
  auto noise = spread::attention_dropout_noise(16, 32, p, torch::TensorOptions().dtype(torch::kFloat));
  ASSERT_EQ(noise.sizes(), (std::vector<int64_t>{16, 32, 32}));
  const double n = double(noise.numel()), kept = (noise > 0).sum().item<double>();
  EXPECT_NEAR(kept / n, 1 - p, 4 * std::sqrt(p * (1 - p) / n));  // 4 binomial standard deviations
  EXPECT_TRUE(torch::all((noise == 0) | (noise == float(1 / (1 - p)))).item<bool>());
}

// bf16 products (the model's bf16 precision). The kernel rounds qkv, dy, the probabilities P and the score
// gradient dS to bf16 (relative error <= u = 2^-8 each) and accumulates every product in float32. Bounds of each
// output's error against float64 attention on the same inputs, propagated through the formulas elementwise
// (absolute values of each factor), with a float32 allowance (relative 2e-5 of the same magnitudes, plus 1e-6):
//   y  = P_ v_                  |dy| <= u P |v|
//   dv = P_^T dy_               (2u + u^2) P^T |dy|
//   dP = dy_ v^T                e_dP = u |dy| |v|^T
//   dS = P * (dP - rowsum(P dP)) e_dS = P * (e_dP + rowsum(P e_dP)), then rounded: + u (|dS| + e_dS)
//   dq = dS_ k s, dk = dS_^T q s (s = 1/sqrt(D))   s e_dS |k|, s e_dS^T |q|
// (qkv is given bf16-exact here, so its rounding is exact; dy is not.)
struct Bf16AttentionBounds {
  torch::Tensor y, grad;  // [B, T, C] and [B, T, 3C], float64
};

Bf16AttentionBounds bf16_attention_bounds(const torch::Tensor& qkv, const torch::Tensor& dy, const torch::Tensor& mask,
                                          int64_t n_head) {
  const double u = 1.0 / 256.0, f32 = 2e-5, floor = 1e-6;
  const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3, D = C / n_head;
  const double scale = 1.0 / std::sqrt(double(D));
  auto heads = [&](const torch::Tensor& x) { return x.view({B, T, n_head, D}).transpose(1, 2); };
  auto merge = [&](const torch::Tensor& x) { return x.transpose(1, 2).reshape({B, T, n_head * D}); };
  auto parts = qkv.split(C, -1);
  auto q = heads(parts[0]), k = heads(parts[1]), v = heads(parts[2]), g = heads(dy);
  auto scores = torch::matmul(q, k.transpose(-1, -2)) * scale;
  if (mask.defined()) scores = scores + mask;
  auto P = torch::softmax(scores, -1);
  auto dP = torch::matmul(g, v.transpose(-1, -2));
  auto dS = P * (dP - (P * dP).sum(-1, true));
  auto Pv = torch::matmul(P, v.abs()), Pdy = torch::matmul(P.transpose(-1, -2), g.abs());
  auto y_bound = (u + f32) * Pv + floor;
  auto dv_bound = (2 * u + u * u + f32) * Pdy + floor;
  auto e_dP = (u + f32) * torch::matmul(g.abs(), v.abs().transpose(-1, -2));
  auto e_dS = P * (e_dP + (P * e_dP).sum(-1, true)) + f32 * P * (dP.abs() + (P * dP.abs()).sum(-1, true));
  e_dS = e_dS + u * (dS.abs() + e_dS);
  auto dq_bound = scale * (torch::matmul(e_dS, k.abs()) + f32 * torch::matmul(dS.abs(), k.abs())) + floor;
  auto dk_bound =
      scale * (torch::matmul(e_dS.transpose(-1, -2), q.abs()) + f32 * torch::matmul(dS.abs().transpose(-1, -2), q.abs())) +
      floor;
  return {merge(y_bound), torch::cat({merge(dq_bound), merge(dk_bound), merge(dv_bound)}, -1)};
}

bool bf16_products_available() { return spread::fused_attention_has_bf16_products(); }

// The fused kernel with bf16 products within the bounds above of float64, and outside what float32 products give
// somewhere (so the products really were bf16). kernel_causal: the kernel's row blocks, the reference's causal mask.
// kernel_window >= 0: the kernel's local window, the reference's band mask.
void expect_bf16_products_within_bounds(const torch::Tensor& mask, int64_t T, bool kernel_causal,
                                        int64_t kernel_window = -1) {
  torch::manual_seed(13);
  auto qkv = torch::randn({kB, T, 3 * kC}).to(torch::kBFloat16).to(torch::kFloat);  // bf16-exact inputs
  auto weights = torch::randn({kB, T, kC});  // dL/dy, rounded by the kernel
  auto ref_mask = kernel_causal ? causal_mask(T) : mask;
  if (kernel_causal && mask.defined()) ref_mask = ref_mask + mask;
  if (kernel_window >= 0) ref_mask = spread::window_mask(T, kernel_window, torch::kFloat);
  auto low = differentiate(qkv, weights, [&](const torch::Tensor& x) {
    return spread::fused_attention(x, mask, kH, 0.0, kernel_causal, kernel_window, torch::kBFloat16);
  });
  auto ref = run(qkv.to(torch::kDouble), weights.to(torch::kDouble), false,
                 ref_mask.defined() ? ref_mask.to(torch::kDouble) : ref_mask);
  auto bounds = bf16_attention_bounds(qkv.to(torch::kDouble), weights.to(torch::kDouble),
                                      ref_mask.defined() ? ref_mask.to(torch::kDouble) : ref_mask, kH);
  auto y_err = (low.y.to(torch::kDouble) - ref.y).abs(), grad_err = (low.grad.to(torch::kDouble) - ref.grad).abs();
  EXPECT_LE((y_err - bounds.y).max().item<double>(), 0.0) << "y outside the bf16 bound";
  EXPECT_LE((grad_err - bounds.grad).max().item<double>(), 0.0) << "dqkv outside the bf16 bound";
  for (int64_t part = 0; part < 3; ++part)  // q, k and v each: their gradient's products ran in bf16 too
    EXPECT_GT(grad_err.narrow(-1, part * kC, kC).max().item<double>(), 1e-4) << "part " << part << " as exact as float32";
  EXPECT_GT(y_err.max().item<double>(), 1e-4) << "y as exact as float32 products";
}

TEST_F(FusedAttention, Bf16ProductsAreWithinTheirRoundingBoundsOfFloat64) {
  if (!bf16_products_available()) GTEST_SKIP() << "no bf16 GEMM (dnnl_gemm_bf16bf16f32, cblas_gemm_bf16bf16f32) here";
  expect_bf16_products_within_bounds({}, kT, false);
  expect_bf16_products_within_bounds(padding_mask(), kT, false);
  // Three row blocks of 64 (bf16 products) with causal column ranges, whose dk and dv products accumulate (beta = 1).
  expect_bf16_products_within_bounds({}, 150, true);
  // ModernBERT's local layers: band row blocks over overlapping key ranges.
  expect_bf16_products_within_bounds({}, 150, false, 20);
}

TEST_F(FusedAttention, Bf16ProductsRunWhereTheProcessHasABf16Gemm) {
  EXPECT_THROW(spread::fused_attention(torch::randn({kB, kT, 3 * kC}), {}, kH, 0.0, false, -1, torch::kHalf),
               c10::Error);
#if SPREAD_EXPECT_FUSED_ATTENTION
  // Debian's LibTorch links libdnnl, whose dnnl_gemm_bf16bf16f32 runs where the CPU has bf16 instructions.
  if (!spread::cpu_bf16_flags().empty()) EXPECT_TRUE(bf16_products_available());
#endif
  if (bf16_products_available()) return;
  // Without one, kBFloat16 runs the float32 products: the same numbers as kFloat.
  torch::manual_seed(14);
  auto qkv = torch::randn({kB, kT, 3 * kC});
  EXPECT_TRUE(torch::equal(spread::fused_attention(qkv, {}, kH, 0.0, false, -1, torch::kBFloat16),
                           spread::fused_attention(qkv, {}, kH)));
}

TEST_F(FusedAttention, RejectsAMaskOfTheWrongShape) {
  auto qkv = torch::randn({kB, kT, 3 * kC});
  EXPECT_THROW(spread::fused_attention(qkv, torch::zeros({kB, kT}), kH), c10::Error);
  EXPECT_THROW(spread::fused_attention(qkv, torch::zeros({1, 1, kT + 1, kT + 1}), kH), c10::Error);
  EXPECT_THROW(spread::fused_attention(torch::randn({kB, kT, 3 * kC + 1}), {}, kH), c10::Error);
  EXPECT_THROW(spread::fused_attention(qkv, {}, kH, 1.0), c10::Error);
}

}  // namespace
