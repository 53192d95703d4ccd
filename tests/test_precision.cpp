// bf16 mixed precision (train.precision = "bf16"): the bf16 linear layers against float64 references within
// bf16's error bound, the model's losses in bf16 against float32, the fallback, and resume in bf16.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>

#include "cli_run.h"
#include "spread/config/recipe.h"
#include "spread/data/loader.h"
#include "spread/log/metrics_log.h"
#include "spread/losses/contrastive.h"
#include "spread/losses/dispersion.h"
#include "spread/model/attention.h"
#include "spread/model/direct_linear.h"
#include "spread/model/recompute.h"
#include "spread/model/transformer.h"
#include "spread/run/checkpoint.h"
#include "spread/run/setup.h"
#include "spread/runtime/blas.h"
#include "spread/runtime/direct_mm.h"
#include "spread/runtime/gemm.h"
#include "spread/runtime/packed_linear.h"
#include "spread/runtime/precision.h"
#include "spread/train/trainer.h"
#include "spread/util/error.h"
#include "spread/util/random.h"

namespace fs = std::filesystem;
using spread::testing::logged;
using spread::testing::fresh_temp_dir;

namespace {

// bf16 keeps 8 significant bits: rounding to nearest has relative error at most u = 2^-8.
constexpr double kBf16U = 1.0 / 256.0;

// Error bound of one bf16 product C = A B (A: [m, k], B: [k, n], float64 values) as oneDNN computes it: A and B
// rounded to bf16 (each product a_i b_i then carries relative error <= 2u + u^2), the k products summed in float32
// (gamma_k = k 2^-24 / (1 - k 2^-24) times the sum of magnitudes), the result rounded to bf16 (u |C|):
//   |C_bf16 - C| <= (2u + u^2 + gamma_k) (|A| |B|) + u (|C| + (2u + u^2 + gamma_k) (|A| |B|)).
torch::Tensor bf16_product_bound(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& exact) {
  const double k = double(a.size(1));
  const double gamma = k * std::ldexp(1.0, -24) / (1.0 - k * std::ldexp(1.0, -24));
  const double input = 2 * kBf16U + kBf16U * kBf16U + gamma;
  auto magnitudes = a.abs().mm(b.abs());
  return input * magnitudes + kBf16U * (exact.abs() + input * magnitudes);
}

// The same product fully in float32 (inputs exact in float32, accumulation only): what the test must exceed
// somewhere to show that the product really ran in bf16.
torch::Tensor fp32_product_bound(const torch::Tensor& a, const torch::Tensor& b) {
  const double k = double(a.size(1));
  return (k + 2) * std::ldexp(1.0, -24) * a.abs().mm(b.abs());
}

void expect_within(const torch::Tensor& got, const torch::Tensor& exact, const torch::Tensor& bound,
                   const std::string& what) {
  auto err = (got.to(torch::kDouble) - exact).abs();
  auto excess = (err - bound).max().item<double>();
  EXPECT_LE(excess, 0.0) << what << ": error exceeds its bound somewhere";
}

void expect_not_float32(const torch::Tensor& got, const torch::Tensor& exact, const torch::Tensor& fp32_bound,
                        const std::string& what) {
  auto err = (got.to(torch::kDouble) - exact).abs();
  EXPECT_GT((err - fp32_bound).max().item<double>(), 0.0) << what << ": as exact as float32, so not bf16";
}

// The bounds below are oneDNN's bf16 kernels' (float32 accumulation), which LibTorch runs where the CPU has a bf16
// instruction set. Without one (e.g. this project's AMD EPYC machines, no AVX-512 at all) LibTorch's fallback
// product falls outside them, measured: dx and dW beyond the bound by 0.009-0.05; spread never trains in bf16 there
// (plan_precision falls back to float32, Precision.* checks that), so there is no promise to check.
#define SKIP_WITHOUT_BF16_INSTRUCTIONS()                                                                      \
  if (spread::cpu_bf16_flags().empty())                                                                        \
  GTEST_SKIP() << "this CPU has neither avx512_bf16 nor amx_bf16: spread runs float32 here, and LibTorch's "   \
                  "fallback bf16 product is not the oneDNN one these bounds describe"

}  // namespace

namespace {

// A linear layer's operands for rows = 4 x (rows / 4) tokens, drawn in this order from the current seed: x [4,
// rows / 4, in] and W [out, in] requiring grad, b [out] requiring grad (or undefined), the upstream gradient G.
struct LinearCase {
  torch::Tensor x, w, b, g;
};

LinearCase linear_case(int64_t rows, int64_t in, int64_t out, bool with_bias = true) {
  LinearCase c;
  c.x = torch::randn({4, rows / 4, in}).requires_grad_(true);
  c.w = (0.1 * torch::randn({out, in})).requires_grad_(true);
  if (with_bias) c.b = torch::randn({out}).requires_grad_(true);
  c.g = torch::randn({4, rows / 4, out});
  return c;
}

}  // namespace

// y = x W^T + b and its gradients for an upstream gradient G: dx = G W, dW = G^T x, db = column sums of G.
TEST(MixedLinear, Bf16OutputAndGradientsAreWithinTheBf16BoundOfFloat64) {
  SKIP_WITHOUT_BF16_INSTRUCTIONS();
  torch::manual_seed(3);
  const int64_t rows = 48, in = 96, out = 40;
  auto [x, w, b, g] = linear_case(rows, in, out);
  auto y = spread::mixed_linear(x, w, b, torch::kBFloat16);
  ASSERT_EQ(y.scalar_type(), torch::kFloat);
  y.backward(g);
  ASSERT_EQ(w.grad().scalar_type(), torch::kFloat);

  auto X = x.detach().reshape({rows, in}).to(torch::kDouble), W = w.detach().to(torch::kDouble);
  auto B = b.detach().to(torch::kDouble), G = g.reshape({rows, out}).to(torch::kDouble);
  auto product = X.mm(W.t());
  // The bias is added in float32 after the product's rounding: one more float32 rounding of the sum.
  auto y_bound = bf16_product_bound(X, W.t(), product) + std::ldexp(1.0, -24) * (product + B).abs() * 2;
  expect_within(y.reshape({rows, out}), product + B, y_bound, "y");
  expect_not_float32(y.reshape({rows, out}), product + B, fp32_product_bound(X, W.t()), "y");

  auto dx = G.mm(W), dw = G.t().mm(X);
  expect_within(x.grad().reshape({rows, in}), dx, bf16_product_bound(G, W, dx), "dx");
  expect_within(w.grad(), dw, bf16_product_bound(G.t(), X, dw), "dW");
  expect_not_float32(w.grad(), dw, fp32_product_bound(G.t(), X), "dW");
  // db is a float32 sum of float32 values: gamma_rows of the sum of magnitudes, far inside the bf16 bound.
  auto db = G.sum(0), db_bound = (rows + 1) * std::ldexp(1.0, -24) * G.abs().sum(0);
  expect_within(b.grad(), db, db_bound, "db");
}

// The recomputing MLP output layer linear(gelu(h)) in bf16: GELU in float32 (spread's erfc approximation, relative
// error < 2e-5, docs/performance.md "Fused CPU kernels"; far below u), then the same product bound as above with
// a = gelu(h); its derivative Phi(h) + h phi(h) is float32 as well, with an error below 2e-5 (Phi(h) + |h| phi(h)).
TEST(MixedLinear, Bf16GeluLinearIsWithinTheBf16BoundOfFloat64) {
  SKIP_WITHOUT_BF16_INSTRUCTIONS();
  torch::manual_seed(4);
  const int64_t rows = 32, in = 64, out = 24;
  auto h = torch::randn({rows, in}).requires_grad_(true);
  auto w = (0.1 * torch::randn({out, in})).requires_grad_(true);
  auto g = torch::randn({rows, out});
  auto y = spread::gelu_linear(h, w, {}, torch::kBFloat16);
  y.backward(g);

  auto H = h.detach().to(torch::kDouble), W = w.detach().to(torch::kDouble), G = g.to(torch::kDouble);
  auto cdf = 0.5 * (1 + torch::erf(H / std::sqrt(2.0)));
  auto A = H * cdf;  // exact GELU
  auto product = A.mm(W.t());
  const double gelu_err = 2e-5;  // float32 GELU's relative error, taken as part of the input rounding
  auto slack = gelu_err * A.abs().mm(W.t().abs());
  expect_within(y, product, bf16_product_bound(A, W.t(), product) + slack, "y");
  auto dw = G.t().mm(A);
  expect_within(w.grad(), dw, bf16_product_bound(G.t(), A, dw) + gelu_err * G.t().abs().mm(A.abs()), "dW");
  // dh = (G W) * gelu'(h): the bf16 product's bound times |gelu'|, plus the float32 derivative's error.
  auto density = torch::exp(-0.5 * H * H) / std::sqrt(2 * M_PI);
  auto derivative = cdf + H * density;
  auto gw = G.mm(W);
  auto dh_bound = bf16_product_bound(G, W, gw) * (derivative.abs() + gelu_err * (cdf + H.abs() * density)) +
                  gelu_err * gw.abs() * (cdf + H.abs() * density) + 1e-7;
  expect_within(h.grad(), gw * derivative, dh_bound, "dh");
}

namespace {

// The bf16 GEMM path (model/direct_linear.h) against float64 products of the same bf16-rounded operands: each of the
// k products of two bf16 values is exact in float32, so what is left is the float32 accumulation (gamma_k times
// the sum of magnitudes) and one float32 rounding of the written value. A bf16 output (LibTorch's bf16 mm, ~2^-9
// relative) is far outside it.
torch::Tensor bf16_exact(const torch::Tensor& t) { return t.to(torch::kBFloat16).to(torch::kDouble); }

// c: what the product was added to (beta 1), or undefined.
torch::Tensor fp32_accumulation_bound(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& exact,
                                      const torch::Tensor& c = {}) {
  const double k = double(a.size(1)) + (c.defined() ? 1 : 0), e = std::ldexp(1.0, -24);
  auto magnitudes = c.defined() ? a.abs().mm(b.abs()) + c.abs() : a.abs().mm(b.abs());
  return k * e / (1 - k * e) * magnitudes + 2 * e * exact.abs();
}

#define SKIP_WITHOUT_BF16_GEMM()                                                                              \
  if (!spread::has_bf16_gemm()) {                                                                              \
    if (SPREAD_EXPECT_FUSED_ATTENTION && !spread::cpu_bf16_flags().empty())                                    \
      FAIL() << "Debian's LibTorch links libdnnl, whose dnnl_gemm_bf16bf16f32 runs on this CPU's bf16 flags"; \
    GTEST_SKIP() << "this process has no bf16 GEMM (oneDNN's or MKL's): LibTorch's bf16 mm runs instead";       \
  }

}  // namespace

// Row-major and transposed operands (a sliced one copied first), the product written or added, k = 0.
TEST(Bf16Gemm, ProductsOfEveryOperandLayoutMatchFloat64) {
  SKIP_WITHOUT_BF16_GEMM();
  torch::manual_seed(21);
  auto a = torch::randn({37, 53}).to(torch::kBFloat16), b = torch::randn({53, 29}).to(torch::kBFloat16);
  auto A = a.to(torch::kDouble), B = b.to(torch::kDouble), exact = A.mm(B);
  auto bound = fp32_accumulation_bound(A, B, exact);
  auto check = [&](const torch::Tensor& got, const char* what) {
    ASSERT_EQ(got.scalar_type(), torch::kFloat) << what;
    expect_within(got, exact, bound, what);
  };
  check(spread::direct_mm(a, b), "row-major");
  check(spread::direct_mm(a.t().contiguous().t(), b), "A transposed");
  check(spread::direct_mm(a, b.t().contiguous().t()), "B transposed");
  auto wide = torch::randn({37, 80}).to(torch::kBFloat16);
  wide.narrow(1, 5, 53).copy_(a);
  check(spread::direct_mm(wide.narrow(1, 5, 53), b), "A sliced");
  auto c = torch::randn({37, 29});
  auto C = c.to(torch::kDouble);
  spread::direct_addmm_(c, a, b);
  expect_within(c, exact + C, fp32_accumulation_bound(A, B, exact + C, C), "added to C");
  // k = 0: the written product is zeros, an added one leaves C as it was.
  auto none_a = a.narrow(1, 0, 0), none_b = b.narrow(0, 0, 0);
  auto written = torch::full({37, 29}, std::nanf(""));
  spread::direct_mm_out(written, none_a, none_b);
  EXPECT_TRUE(torch::equal(written, torch::zeros({37, 29})));
  auto kept = c.clone();
  spread::direct_addmm_(kept, none_a, none_b);
  EXPECT_TRUE(torch::equal(kept, c));
  EXPECT_THROW(spread::direct_mm(a, a), c10::Error);
}

// mixed_linear in bf16 on the CPU: the output and both product gradients are the float64 products of the
// bf16-rounded operands (x, W and the upstream gradient G) up to float32 accumulation, with no bf16 rounding of
// the result; the bias is added in float32 (by the GEMM, beta = 1), db a float32 sum.
TEST(MixedLinear, Bf16OnTheCpuWritesItsProductsInFloat32) {
  SKIP_WITHOUT_BF16_GEMM();
  torch::manual_seed(22);
  const int64_t rows = 48, in = 96, out = 40;
  for (const bool with_bias : {true, false}) {
    SCOPED_TRACE(with_bias ? "with a bias" : "without a bias");
    auto [x, w, b, g] = linear_case(rows, in, out, with_bias);
    ASSERT_TRUE(spread::takes_direct_gemm(x, torch::kBFloat16, /*training=*/false));
    auto y = spread::mixed_linear(x, w, b, torch::kBFloat16);
    ASSERT_EQ(y.sizes(), torch::IntArrayRef({4, rows / 4, out}));
    y.backward(g);

    auto X = bf16_exact(x.detach().reshape({rows, in})), W = bf16_exact(w.detach());
    auto G = bf16_exact(g.reshape({rows, out}));
    auto B = with_bias ? b.detach().to(torch::kDouble).expand({rows, out}) : torch::zeros({rows, out}, torch::kDouble);
    auto expected = X.mm(W.t()) + B;
    expect_within(y.reshape({rows, out}), expected, fp32_accumulation_bound(X, W.t(), expected, B), "y");
    auto dx = G.mm(W), dw = G.t().mm(X);
    expect_within(x.grad().reshape({rows, in}), dx, fp32_accumulation_bound(G, W, dx), "dx");
    expect_within(w.grad(), dw, fp32_accumulation_bound(G.t(), X, dw), "dW");
    if (!with_bias) continue;
    auto G32 = g.reshape({rows, out}).to(torch::kDouble);
    expect_within(b.grad(), G32.sum(0), (rows + 1) * std::ldexp(1.0, -24) * G32.abs().sum(0), "db");
  }
}

#define SKIP_WITHOUT_ONEDNN_SGEMM()                                                                      \
  if (!spread::has_onednn_sgemm()) {                                                                      \
    if (SPREAD_EXPECT_FUSED_ATTENTION) FAIL() << "Debian's LibTorch links libdnnl, which exports dnnl_sgemm"; \
    GTEST_SKIP() << "this process has no dnnl_sgemm (the wheel's LibTorch keeps oneDNN's symbols to itself)";  \
  }

// float32 linear layers on the CPU in a training module: y, dx and dW by oneDNN's dnnl_sgemm
// (model/direct_linear.h), each within float32's accumulation bound of float64, and (the wiring) three products
// counted by runtime/direct_mm.
TEST(MixedLinear, Fp32TrainingProductsGoToOneDnnSgemm) {
  SKIP_WITHOUT_ONEDNN_SGEMM();
  torch::manual_seed(24);
  const int64_t rows = 48, in = 96, out = 40;
  auto [x, w, b, g] = linear_case(rows, in, out);
  ASSERT_TRUE(spread::takes_direct_gemm(x, torch::kFloat, /*training=*/true));
  const int64_t before = spread::direct_products_run(torch::kFloat);
  auto y = spread::mixed_linear(x, w, b, torch::kFloat, /*training=*/true);
  EXPECT_EQ(spread::direct_products_run(torch::kFloat) - before, 1) << "y";
  ASSERT_TRUE(y.grad_fn() != nullptr);
  EXPECT_NE(y.grad_fn()->name().find("DirectLinear"), std::string::npos) << y.grad_fn()->name();
  EXPECT_NO_THROW(y.add_(0.0)) << "the output is a tensor of its own, not a view made inside the node";
  y.backward(g);
  EXPECT_EQ(spread::direct_products_run(torch::kFloat) - before, 3) << "dx and dW";

  auto X = x.detach().reshape({rows, in}).to(torch::kDouble), W = w.detach().to(torch::kDouble);
  auto G = g.reshape({rows, out}).to(torch::kDouble), B = b.detach().to(torch::kDouble);
  auto expected = X.mm(W.t()) + B;
  expect_within(y.reshape({rows, out}), expected, fp32_product_bound(X, W.t()) + std::ldexp(1.0, -23) * expected.abs(),
                "y");
  expect_within(x.grad().reshape({rows, in}), G.mm(W), fp32_product_bound(G, W), "dx");
  expect_within(w.grad(), G.t().mm(X), fp32_product_bound(G.t(), X), "dW");

  // A frozen weight, no bias, and the stride-0 gradient of a sum: dx = 1 W, every row W's column sums.
  x.grad().zero_();
  spread::mixed_linear(x, w.detach(), {}, torch::kFloat, true).sum().backward();
  auto ones = torch::ones({rows, out}, torch::kDouble);
  expect_within(x.grad().reshape({rows, in}), ones.mm(W), fp32_product_bound(ones, W), "dx of a sum");
  // Inference (a module in eval mode), with gradients or without: LibTorch's linear as it is.
  EXPECT_FALSE(spread::takes_direct_gemm(x, torch::kFloat, /*training=*/false));
  const int64_t inference_before = spread::direct_products_run(torch::kFloat);
  EXPECT_EQ(spread::mixed_linear(x, w, b, torch::kFloat).grad_fn()->name().find("DirectLinear"), std::string::npos);
  EXPECT_EQ(spread::direct_products_run(torch::kFloat), inference_before);
  // A training module's pass without gradients (a cached step's first pass) computes what its replay differentiates.
  const torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(spread::mixed_linear(x, w, b, torch::kFloat, true), y.detach()));
  EXPECT_EQ(spread::direct_products_run(torch::kFloat), inference_before + 1);
}

// Which layers of a model take the float32 oneDNN path: every linear product of a training model (qkv, the
// attention's output, the MLP's two layers, the LM head: 4 per block + 1), with gradients or without; none in eval
// mode.
TEST(MixedLinear, Fp32ModelInTrainingModeRunsEveryLinearProductThroughOneDnn) {
  SKIP_WITHOUT_ONEDNN_SGEMM();
  for (const bool gated : {false, true}) {
    SCOPED_TRACE(gated ? "Llama-style block" : "GPT block");
    spread::TransformerConfig cfg;
    cfg.vocab_size = 50, cfg.n_layer = 2, cfg.n_head = 2, cfg.n_embd = 32, cfg.block_size = 16;
    if (gated)
      cfg.mlp.gated = true, cfg.mlp.silu = true, cfg.norm.rms = true, cfg.positions.rope = true, cfg.bias = false;
    torch::manual_seed(26);
    spread::Transformer model(cfg);
    const auto ids = torch::randint(0, cfg.vocab_size, {2, 16}, torch::kLong);
    auto products_of_forward = [&] {
      const int64_t before = spread::direct_products_run(torch::kFloat);
      model->forward(ids);
      return spread::direct_products_run(torch::kFloat) - before;
    };
    model->train();
    EXPECT_EQ(products_of_forward(), 4 * cfg.n_layer + 1);
    {
      const torch::NoGradGuard no_grad;
      EXPECT_EQ(products_of_forward(), 4 * cfg.n_layer + 1) << "without gradients";
    }
    model->eval();
    EXPECT_EQ(products_of_forward(), 0) << "eval mode";
  }
}

// The recomputing MLP output layers (gelu_linear, gated_linear) take the same float32 path while training (one
// product forward, two backward), within float32's bound of float64, and LibTorch's linear in eval mode. Inputs
// where the activation is the identity in float32, so that the bounds are those of plain products: GELU(h) =
// h Phi(h) with Phi(h) and GELU'(h) rounding to 1 for h >= 8; SiLU(a) = a sigmoid(a) with sigmoid(a) and SiLU'(a)
// rounding to 1 for a >= 30.
TEST(MixedLinear, Fp32RecomputingLayersTakeOneDnnSgemmWhileTraining) {
  SKIP_WITHOUT_ONEDNN_SGEMM();
  torch::manual_seed(25);
  const int64_t rows = 64, in = 72, out = 48;
  auto w = (0.1 * torch::randn({out, in})).requires_grad_(true);
  auto b = torch::randn({out}).requires_grad_(true);
  auto g = torch::randn({rows, out});
  const auto W = w.detach().to(torch::kDouble), B = b.detach().to(torch::kDouble), G = g.to(torch::kDouble);
  // y, dW and d(activation) of the float64 activation A, against float32 products' bounds.
  auto check = [&](const torch::Tensor& y, const torch::Tensor& A, const torch::Tensor& grad_activation) {
    auto expected = A.mm(W.t()) + B;
    expect_within(y, expected, fp32_product_bound(A, W.t()) + std::ldexp(1.0, -23) * expected.abs(), "y");
    expect_within(w.grad(), G.t().mm(A), fp32_product_bound(G.t(), A), "dW");
    expect_within(grad_activation, G.mm(W), fp32_product_bound(G, W), "d(activation)");
  };
  auto products_while = [](const std::function<void()>& step) {
    const int64_t before = spread::direct_products_run(torch::kFloat);
    step();
    return spread::direct_products_run(torch::kFloat) - before;
  };

  auto h = (8 + 4 * torch::rand({rows, in})).requires_grad_(true);
  torch::Tensor y;
  EXPECT_EQ(products_while([&] { y = spread::gelu_linear(h, w, b, torch::kFloat, {}, /*training=*/true); }), 1)
      << "GELU forward";
  EXPECT_EQ(products_while([&] { y.backward(g); }), 2) << "GELU backward";
  check(y, h.detach().to(torch::kDouble), h.grad());

  w.grad().zero_();
  auto a = 30 + 4 * torch::rand({rows, in}), v = torch::randn({rows, in});
  auto gated = torch::cat({a, v}, 1).requires_grad_(true);
  EXPECT_EQ(products_while([&] { y = spread::gated_linear(gated, w, b, /*silu=*/true, torch::kFloat, true); }), 1)
      << "SwiGLU forward";
  EXPECT_EQ(products_while([&] { y.backward(g); }), 2) << "SwiGLU backward";
  // dL/dv = (G W) SiLU(a) = (G W) a.
  const auto A = a.to(torch::kDouble);
  check(y, A * v.to(torch::kDouble), gated.grad().narrow(1, in, in) / A);

  // Inference (eval mode) runs LibTorch's linear (OpenBLAS, faster on encoders' forward passes).
  EXPECT_EQ(products_while([&] { y = spread::gelu_linear(h, w, b, torch::kFloat); }), 0) << "GELU inference";
  EXPECT_EQ(products_while([&] { y = spread::gated_linear(gated, w, b, true, torch::kFloat); }), 0)
      << "SwiGLU inference";
}

// The recomputing MLP output layer (gelu_linear) takes the same path in forward and backward. Inputs h >= 8, where
// GELU(h) = h Phi(h) is h to within 1e-14 and its derivative 1 (spread's float32 GELU to within 2e-5 relative):
// so y = h_bf16 W_bf16^T, dW = G_bf16^T h_bf16 and dh = G_bf16 W_bf16 up to float32 accumulation and 2e-5.
TEST(MixedLinear, Bf16GeluLinearOnTheCpuWritesItsProductsInFloat32) {
  SKIP_WITHOUT_BF16_GEMM();
  torch::manual_seed(23);
  const int64_t rows = 32, in = 64, out = 24;
  auto h = (8 + 4 * torch::rand({rows, in})).to(torch::kBFloat16).to(torch::kFloat).requires_grad_(true);
  auto w = (0.1 * torch::randn({out, in})).requires_grad_(true);
  auto g = torch::randn({rows, out});
  auto y = spread::gelu_linear(h, w, {}, torch::kBFloat16);
  y.backward(g);

  auto H = h.detach().to(torch::kDouble), W = bf16_exact(w.detach()), G = bf16_exact(g);
  const double gelu_err = 2e-5;
  auto product = H.mm(W.t()), dw = G.t().mm(H), dh = G.mm(W);
  expect_within(y, product, fp32_accumulation_bound(H, W.t(), product) + gelu_err * H.abs().mm(W.t().abs()), "y");
  expect_within(w.grad(), dw, fp32_accumulation_bound(G.t(), H, dw) + gelu_err * G.t().abs().mm(H.abs()), "dW");
  expect_within(h.grad(), dh, fp32_accumulation_bound(G, W, dh) + gelu_err * dh.abs(), "dh");
}

// The bf16 products of gelu_linear read GELU(h + h_bias) rounded to bf16 to nearest, ties to even, as LibTorch's
// conversion rounds it, in forward and in the recompute for dW (the bound tests above also pass with truncation).
// Inputs h + h_bias in [8, 15), where spread's GELU is the identity in float32, placed between bf16 neighbours
// (spacing 2^-4 there): a quarter, three quarters, and exact halves above odd and above even neighbours. With
// integer weights and upstream gradients every product and sum is exact in float32, so y and dW must equal the
// float64 results on the LibTorch-rounded activation exactly; rounding down, half up or not at all would not.
TEST(MixedLinear, Bf16GeluLinearRoundsItsActivationToNearestEvenInBothPasses) {
  SKIP_WITHOUT_BF16_GEMM();
  torch::manual_seed(29);
  const int64_t rows = 32, in = 64, out = 24;
  const double spacing = 1.0 / 16;
  auto neighbour = 8 + spacing * torch::randint(0, 80, {rows, in}, torch::kDouble);  // bf16 values in [8, 13)
  auto fraction = torch::tensor({0.25, 0.5, 0.75, 0.5}, torch::kDouble).repeat({rows * in / 4}).view({rows, in});
  auto h_bias = torch::randint(0, 2, {in}).to(torch::kFloat);  // 0 or 1: h + h_bias stays exact in float32
  auto h = (neighbour + spacing * fraction).to(torch::kFloat).requires_grad_(true);
  auto w = torch::randint(-3, 4, {out, in}).to(torch::kFloat).requires_grad_(true);
  auto g = torch::randint(-3, 4, {rows, out}).to(torch::kFloat);
  auto y = spread::gelu_linear(h, w, {}, torch::kBFloat16, h_bias, /*training=*/true);
  y.backward(g);

  auto rounded = (h.detach() + h_bias).to(torch::kBFloat16).to(torch::kDouble);
  ASSERT_GT((rounded - (h.detach() + h_bias).to(torch::kDouble)).abs().min().item<double>(), 0.0)
      << "every activation must lie between bf16 values";
  auto W = w.detach().to(torch::kDouble), G = g.to(torch::kDouble);
  EXPECT_TRUE(torch::equal(y.to(torch::kDouble), rounded.mm(W.t()))) << "y";
  EXPECT_TRUE(torch::equal(w.grad().to(torch::kDouble), G.t().mm(rounded))) << "dW";
  EXPECT_TRUE(torch::equal(h.grad().to(torch::kDouble), G.mm(W))) << "dh (GELU'(h) = 1 here)";
}

namespace {

// The same weights in float32 and in bf16 products: the losses on the model's outputs (cross-entropy, angular
// dispersion of the last hidden states, InfoNCE of mean-pooled states) stay within stated tolerances, and so do
// their gradients as a whole. Tolerances: each bf16 product has relative error ~u = 0.4%, ~3 products deep per
// block and partly averaging out; the losses here are O(1) and move by < 1e-2 relative, gradients by a cosine
// > 0.99. A product in float16 range-limited or a lost gradient path would break these.
void expect_bf16_losses_close_to_float32(spread::TransformerConfig cfg) {
  cfg.vocab_size = 50;
  cfg.n_layer = 2;
  cfg.n_embd = 32;
  cfg.block_size = 16;
  torch::manual_seed(5);
  spread::Transformer fp32(cfg);
  cfg.matmul_dtype = torch::kBFloat16;
  spread::Transformer bf16(cfg);
  {
    torch::NoGradGuard no_grad;
    auto from = fp32->named_parameters();
    for (auto& p : bf16->named_parameters()) p.value().copy_(from[p.key()]);
  }
  auto idx = torch::randint(0, cfg.vocab_size, {6, 16});
  auto targets = torch::randint(0, cfg.vocab_size, {6, 16});
  spread::DispersionOptions disp;
  spread::ContrastiveOptions nce;
  nce.temperature = 0.1;
  struct Losses {
    double ce, disp, nce;
    std::vector<torch::Tensor> grads;
  };
  auto run = [&](spread::Transformer& model) {
    model->zero_grad();
    auto out = model->forward(idx, /*want_hidden=*/false, /*want_logits=*/true);
    EXPECT_EQ(out.logits.scalar_type(), torch::kFloat);
    auto ce = spread::TransformerImpl::lm_loss(out.logits, targets);
    auto d = spread::dispersion_loss(out.final_hidden, {}, disp, 1);
    auto pooled = out.final_hidden.mean(1);
    auto n = spread::info_nce(pooled.narrow(0, 0, 3), pooled.narrow(0, 3, 3), nce);
    (ce + d + n).backward();
    Losses l{ce.item<double>(), d.item<double>(), n.item<double>(), {}};
    for (auto& p : model->parameters()) l.grads.push_back(p.grad().flatten().clone());
    return l;
  };
  Losses a = run(fp32), b = run(bf16);
  EXPECT_NEAR(b.ce, a.ce, 1e-2 * std::abs(a.ce));
  EXPECT_NEAR(b.disp, a.disp, 1e-2 * std::abs(a.disp));
  EXPECT_NEAR(b.nce, a.nce, 1e-2 * std::abs(a.nce));
  EXPECT_NE(b.ce, a.ce) << "bf16 products should move the loss a little";
  auto ga = torch::cat(a.grads), gb = torch::cat(b.grads);
  EXPECT_GT(torch::cosine_similarity(ga, gb, 0).item<double>(), 0.99);
  EXPECT_NEAR(gb.norm().item<double>(), ga.norm().item<double>(), 0.02 * ga.norm().item<double>());
}

}  // namespace

TEST(MixedLinear, ModelLossesInBf16StayWithinTolerancesOfFloat32) {
  spread::TransformerConfig bert;
  bert.n_head = 2, bert.causal = false;
  expect_bf16_losses_close_to_float32(bert);
}

// The modern blocks' own nodes in bf16 products: the gated MLP (gated_linear's two products), rotary positions and
// grouped-query heads; a Llama-shaped and a ModernBERT-shaped model.
TEST(MixedLinear, ModernBlockLossesInBf16StayWithinTolerancesOfFloat32) {
  spread::TransformerConfig llama;
  llama.n_head = 4, llama.attention.n_kv_head = 2, llama.positions.rope = true, llama.norm.rms = true,
  llama.mlp.gated = true;
  llama.mlp.silu = true, llama.mlp.width = 48, llama.bias = false;
  expect_bf16_losses_close_to_float32(llama);
  spread::TransformerConfig modernbert;
  modernbert.n_head = 2, modernbert.causal = false, modernbert.positions.rope = true, modernbert.mlp.gated = true;
  modernbert.mlp.width = 48, modernbert.attention.window = 4, modernbert.attention.global_every = 2;
  expect_bf16_losses_close_to_float32(modernbert);
}

// The bf16 model's attention multiplies in bf16 too: SelfAttention's output is the fused kernel's with bf16
// products between its two bf16 linear layers, and not the float32 kernel's.
TEST(MixedLinear, AttentionOfABf16ModelTakesBf16Products) {
  if (!spread::fused_attention_supported(torch::zeros({1, 1, 3})) || !spread::fused_attention_has_bf16_products())
    GTEST_SKIP() << "no fused attention with bf16 products in this process";
  spread::TransformerConfig cfg;
  cfg.n_embd = 32, cfg.n_head = 4, cfg.block_size = 16, cfg.dropout = 0.0, cfg.matmul_dtype = torch::kBFloat16;
  torch::manual_seed(15);
  spread::SelfAttention attention(cfg);
  auto x = torch::randn({2, 16, 32});
  auto mask = attention->attention_mask({}, 16);
  auto y = attention->forward(x, mask);
  auto qkv = spread::mixed_linear(x, attention->qkv->weight, attention->qkv->bias, torch::kBFloat16);
  auto with_products = [&](at::ScalarType products) {
    auto a = spread::fused_attention(qkv, mask, cfg.n_head, 0.0, cfg.causal, -1, products);
    return spread::mixed_linear(a, attention->proj->weight, attention->proj->bias, torch::kBFloat16);
  };
  EXPECT_TRUE(torch::equal(y, with_products(torch::kBFloat16)));
  EXPECT_FALSE(torch::equal(y, with_products(torch::kFloat)));
}

TEST(Precision, RecipeKeyIsFp32ByDefaultAndRejectsOtherNamesByKey) {
  EXPECT_EQ(spread::parse_recipe("", "r.toml").train.precision, "fp32");
  EXPECT_EQ(spread::parse_recipe("[train]\nprecision = \"bf16\"\n", "r.toml").train.precision, "bf16");
  for (const char* bad : {"[train]\nprecision = \"fp16\"\n", "[train]\nprecision = 16\n"}) {
    try {
      spread::parse_recipe(bad, "r.toml");
      ADD_FAILURE() << "accepted " << bad;
    } catch (const spread::UserError& e) {
      EXPECT_NE(std::string(e.what()).find("train.precision"), std::string::npos) << e.what();
    }
  }
}

TEST(Precision, Fp32IsNeverChangedAndTheEnvironmentForcesTheFallback) {
  EXPECT_EQ(spread::plan_precision("fp32", torch::kCPU).used, "fp32");
  ::setenv("SPREAD_FORCE_NO_BF16", "1", 1);
  auto plan = spread::plan_precision("bf16", torch::kCPU);
  ::unsetenv("SPREAD_FORCE_NO_BF16");
  EXPECT_EQ(plan.used, "fp32");
  EXPECT_EQ(plan.matmul_dtype(), torch::kFloat);
  EXPECT_NE(plan.reason.find("SPREAD_FORCE_NO_BF16"), std::string::npos);
  EXPECT_EQ(plan.header_line().rfind("warning: ", 0), 0u) << plan.header_line();
}

TEST(Precision, Bf16IsUsedWhereTheCpuHasItAndItIsFaster) {
  const std::string flags = spread::cpu_bf16_flags();
  auto plan = spread::plan_precision("bf16", torch::kCPU);
  if (flags.empty()) {
    EXPECT_EQ(plan.used, "fp32");
    GTEST_SKIP() << "this CPU has no bf16 instructions: the fallback was checked";
  }
  EXPECT_GT(plan.fp32_gflops, 0);
  EXPECT_EQ(plan.used == "bf16", plan.bf16_gflops > plan.fp32_gflops) << plan.reason;
}

// The speed check times its products on one thread (so that other work on the machine cannot decide it) and gives
// the run back the thread counts it had, LibTorch's and OpenBLAS's.
TEST(Precision, TheSpeedCheckRunsOnOneThreadAndRestoresBothThreadCounts) {
  const int before = at::get_num_threads();
  spread::apply_threads(2);  // both counts, so that an earlier test's OpenBLAS count cannot linger
  const spread::BlasInfo blas = spread::blas_info();
  {
    const spread::SingleThreaded one_thread;
    EXPECT_EQ(at::get_num_threads(), 1);
    if (blas.library == "OpenBLAS") EXPECT_EQ(spread::blas_info().blas_threads, 1);
  }
  EXPECT_EQ(at::get_num_threads(), 2);
  EXPECT_EQ(spread::blas_info().blas_threads, blas.blas_threads);
  spread::plan_precision("bf16", torch::kCPU);
  EXPECT_EQ(at::get_num_threads(), 2);
  EXPECT_EQ(spread::blas_info().blas_threads, blas.blas_threads);
  spread::apply_threads(before);
}

namespace {

spread::Recipe tiny_recipe(const fs::path& dir, const std::string& name, int64_t steps,
                           std::vector<std::string> extra = {}) {
  auto corpus = dir / "corpus.txt";
  if (!fs::exists(corpus)) {
    std::ofstream out(corpus);
    const char* words[] = {"the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "and", "cat"};
    uint64_t s = 11;
    for (int i = 0; i < 2000; ++i) {
      s = spread::splitmix64(s);
      out << words[s % 10] << ((s >> 20) % 9 == 0 ? ".\n" : " ");
    }
  }
  std::vector<std::string> o = {"run.name=" + name, "run.out_dir=" + dir.string(), "data.source=text",
                                "data.path=" + corpus.string(), "tokenizer.kind=char", "model.n_layer=2",
                                "model.n_head=2", "model.n_embd=32", "model.block_size=16",
                                "train.batch_size=4", "train.max_steps=" + std::to_string(steps),
                                "train.warmup_steps=2", "train.log_every=1", "train.eval_every=0",
                                "train.ckpt_every=4", "train.keep_last=10", "model.dropout=0.1",
                                "loss.dispersion.enabled=true", "loss.dispersion.lambda=0.5"};
  o.insert(o.end(), extra.begin(), extra.end());
  return spread::parse_recipe("", "test.toml", o);
}

nlohmann::json run_precision(const fs::path& run_dir) {
  std::ifstream in(run_dir / "run.json");
  return nlohmann::json::parse(in).at("precision");
}

}  // namespace

// The fallback trains exactly as float32 does, and run.json says so.
TEST(Precision, ForcedFallbackTrainsBitwiseLikeFloat32) {
  auto dir = fresh_temp_dir("bf16_fallback");
  ASSERT_EQ(spread::train(tiny_recipe(dir, "fp32", 4), spread::TrainStart::Fresh), 0);
  ::setenv("SPREAD_FORCE_NO_BF16", "1", 1);
  const int rc = spread::train(tiny_recipe(dir, "fallback", 4, {"train.precision=bf16"}), spread::TrainStart::Fresh);
  ::unsetenv("SPREAD_FORCE_NO_BF16");
  ASSERT_EQ(rc, 0);
  EXPECT_EQ(run_precision(dir / "fallback").at("used"), "fp32");
  EXPECT_EQ(run_precision(dir / "fallback").at("requested"), "bf16");
  EXPECT_EQ(logged(dir / "fp32", "loss"), logged(dir / "fallback", "loss"));
  fs::remove_all(dir);
}

// A bf16 run (with dropout and the dispersion term) resumes bitwise in bf16, and its float32 checkpoint continues
// in float32. Its LM and dispersion losses stay within 2% of a float32 run's over the steps.
TEST(Precision, Bf16ResumesBitwiseAndContinuesInFloat32) {
  SKIP_WITHOUT_BF16_INSTRUCTIONS();
  if (std::getenv("SPREAD_FORCE_NO_BF16")) GTEST_SKIP() << "SPREAD_FORCE_NO_BF16 is set";
  // The bf16 path whether or not its products beat float32's here (they do not on AVX512-BF16 without AMX).
  struct ForceBf16 {
    const char* before = std::getenv("SPREAD_FORCE_BF16");
    std::string saved = before ? before : "";
    ForceBf16() { ::setenv("SPREAD_FORCE_BF16", "1", 1); }
    ~ForceBf16() { before ? ::setenv("SPREAD_FORCE_BF16", saved.c_str(), 1) : ::unsetenv("SPREAD_FORCE_BF16"); }
  } force;
  auto dir = fresh_temp_dir("bf16_resume");
  ASSERT_EQ(spread::train(tiny_recipe(dir, "straight", 8, {"train.precision=bf16"}), spread::TrainStart::Fresh), 0);
  ASSERT_EQ(spread::train(tiny_recipe(dir, "broken", 8, {"train.precision=bf16"}), spread::TrainStart::Fresh), 0);
  ASSERT_EQ(spread::train(tiny_recipe(dir, "fp32", 8), spread::TrainStart::Fresh), 0);
  EXPECT_EQ(run_precision(dir / "straight").at("used"), "bf16");
  for (const auto& path : spread::list_checkpoints((dir / "broken").string()))
    if (path.find("step_00000004") == std::string::npos) fs::remove(path);
  // Checkpoints hold float32 only.
  auto ckpt = spread::read_checkpoint(spread::list_checkpoints((dir / "broken").string())[0]);
  for (const auto& [name, t] : ckpt.tensors)
    if (name.rfind("model.", 0) == 0) EXPECT_EQ(t.scalar_type(), torch::kFloat) << name;
  ASSERT_EQ(spread::train(spread::recipe_of_run((dir / "broken").string()), spread::TrainStart::Resume), 0);
  EXPECT_EQ(logged(dir / "straight", "loss"), logged(dir / "broken", "loss"));
  EXPECT_EQ(logged(dir / "straight", "loss_disp"), logged(dir / "broken", "loss_disp"));

  auto a = logged(dir / "fp32", "loss"), b = logged(dir / "straight", "loss");
  auto da = logged(dir / "fp32", "loss_disp"), db = logged(dir / "straight", "loss_disp");
  ASSERT_EQ(a.size(), 8u);
  ASSERT_EQ(da.size(), 8u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(b[i], a[i], 0.02 * std::abs(a[i])) << "loss, step " << i + 1;
    EXPECT_NEAR(db[i], da[i], 0.02 * std::abs(da[i])) << "loss_disp, step " << i + 1;
  }
  EXPECT_NE(a, b) << "the bf16 run computed exactly as float32";

  // Continue the bf16 run in float32 from its step-4 checkpoint.
  for (const auto& path : spread::list_checkpoints((dir / "broken").string()))
    if (path.find("step_00000004") == std::string::npos) fs::remove(path);
  ASSERT_EQ(spread::train(spread::recipe_of_run((dir / "broken").string(), {"train.precision=fp32"}),
                          spread::TrainStart::Resume),
            0);
  EXPECT_EQ(run_precision(dir / "broken").at("used"), "fp32");
  auto c = logged(dir / "broken", "loss");
  ASSERT_EQ(c.size(), 8u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(c[i], b[i]) << "step " << i + 1;
  for (size_t i = 4; i < 8; ++i) EXPECT_NEAR(c[i], b[i], 0.02 * std::abs(b[i])) << "step " << i + 1;
  fs::remove_all(dir);
}

// Inference products with the weight packed once (runtime/packed_linear.h): built against Debian's LibTorch 1.13
// with libdnnl-dev; other builds keep LibTorch's linear and skip these.
#define SKIP_WITHOUT_PACKED_LINEAR()                                                                             \
  if (!spread::has_packed_linear())                                                                              \
  GTEST_SKIP() << "this build has no packed inference product (it needs Debian's LibTorch 1.13 and libdnnl-dev)"

namespace {

// y = x W^T + b for x [..., in] against float64, within float32's bound for a sum of `in` products.
void expect_packed_product(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                           const std::string& what) {
  const torch::NoGradGuard no_grad;
  const spread::PackedWeightsScope scope;
  const int64_t before = spread::packed_products_run();
  auto y = spread::packed_linear(x, w, b);
  EXPECT_EQ(spread::packed_products_run() - before, 1) << what;
  auto sizes = x.sizes().vec();
  sizes.back() = w.size(0);
  ASSERT_EQ(y.sizes(), torch::IntArrayRef(sizes)) << what;
  auto X = x.reshape({-1, x.size(-1)}).to(torch::kDouble), W = w.to(torch::kDouble);
  auto expected = X.mm(W.t());
  if (b.defined()) expected = expected + b.to(torch::kDouble);
  expect_within(y.reshape({-1, w.size(0)}), expected,
                fp32_product_bound(X, W.t()) + std::ldexp(1.0, -23) * expected.abs(), what);
}

}  // namespace

TEST(PackedLinear, MatchesFloat64WithinTheFloat32Bound) {
  SKIP_WITHOUT_PACKED_LINEAR();
  torch::manual_seed(31);
  const auto w = torch::randn({70, 96}), b = torch::randn({70});
  expect_packed_product(torch::randn({37, 5, 96}), w, b, "[37, 5, 96] with a bias");
  expect_packed_product(torch::randn({300, 96}), w, {}, "[300, 96] without a bias");
  expect_packed_product(torch::randn({1, 96}), w, b, "one row");
  expect_packed_product(torch::randn({8, 96}).t().contiguous().t(), w, b, "column-major rows");
}

// Within one scope the packed copy follows its weight: changed in place through LibTorch (the version counter moves,
// the storage does not), replaced by set_data, or freed and a new weight of the same shape made. A cache that kept
// the first packing would give the old product in each case. A weight written through its pointer (as spread's
// optimizer writes parameters) is followed across scopes: the cache ends with the scope.
TEST(PackedLinear, FollowsAWeightChangedInPlaceReplacedOrMadeAnew) {
  SKIP_WITHOUT_PACKED_LINEAR();
  const spread::PackedWeightsScope scope;
  torch::manual_seed(32);
  const auto x = torch::randn({20, 48});
  auto w = torch::randn({24, 48}).requires_grad_(true);  // a parameter, as a model's
  const auto b = torch::randn({24});
  expect_packed_product(x, w.detach(), b, "first call");
  {
    const torch::NoGradGuard no_grad;
    spread::packed_linear(x, w, b);
    w.mul_(-2.0);  // as an optimizer step changes it
  }
  expect_packed_product(x, w.detach(), b, "after an in-place change");
  {
    const torch::NoGradGuard no_grad;
    auto y = spread::packed_linear(x, w, b);
    EXPECT_TRUE(torch::allclose(y, torch::addmm(b, x, w.detach().t()), 1e-4, 1e-4)) << "the parameter itself";
  }
  w.set_data(torch::randn({24, 48}));
  {
    const torch::NoGradGuard no_grad;
    auto y = spread::packed_linear(x, w, b);
    EXPECT_TRUE(torch::allclose(y, torch::addmm(b, x, w.detach().t()), 1e-4, 1e-4)) << "after set_data";
  }
  for (int i = 0; i < 3; ++i) expect_packed_product(x, torch::randn({24, 48}), b, "a new weight " + std::to_string(i));
}

TEST(PackedLinear, AWeightWrittenThroughItsPointerIsPackedAgainInTheNextScope) {
  SKIP_WITHOUT_PACKED_LINEAR();
  torch::manual_seed(34);
  const auto x = torch::randn({20, 48}), w = torch::randn({24, 48}), b = torch::randn({24});
  const torch::NoGradGuard no_grad;
  auto product_in_a_scope = [&] {
    const spread::PackedWeightsScope scope;
    return spread::packed_linear(x, w, b);
  };
  product_in_a_scope();
  const auto version = w._version();
  float* data = w.data_ptr<float>();
  for (int64_t i = 0; i < w.numel(); ++i) data[i] = -2 * data[i];  // as FlatOptimizer writes: no version change
  ASSERT_EQ(w._version(), version);
  EXPECT_TRUE(torch::allclose(product_in_a_scope(), torch::addmm(b, x, w.t()), 1e-4, 1e-4));
}

// Which layers of a model take the packed product: every linear product of an eval-mode model without gradients
// in a scope (qkv, the attention's output, the MLP's two layers, the LM head: 4 per block + 1; BERT's post-norm
// encoder likewise), with the same outputs as LibTorch's linear; none in training mode, with gradients on or
// outside a scope.
TEST(PackedLinear, InferenceRunsEveryLinearProductOfAModelPacked) {
  SKIP_WITHOUT_PACKED_LINEAR();
  for (const int kind : {0, 1, 2}) {
    spread::TransformerConfig cfg;
    cfg.vocab_size = 50, cfg.n_layer = 2, cfg.n_head = 2, cfg.n_embd = 32, cfg.block_size = 16;
    if (kind == 1)
      cfg.mlp.gated = true, cfg.mlp.silu = true, cfg.norm.rms = true, cfg.positions.rope = true, cfg.bias = false;
    if (kind == 2) cfg.norm.post = true, cfg.causal = false, cfg.compat.type_vocab_size = 2;
    SCOPED_TRACE(kind == 0 ? "GPT block" : kind == 1 ? "Llama-style block" : "BERT block");
    torch::manual_seed(33);
    spread::Transformer model(cfg);
    const auto ids = torch::randint(0, cfg.vocab_size, {3, 16}, torch::kLong);
    auto forward = [&](int64_t& products) {
      const int64_t before = spread::packed_products_run();
      auto logits = model->forward(ids).logits;
      products = spread::packed_products_run() - before;
      return logits.detach();
    };
    int64_t products = 0;
    model->eval();
    const auto unpacked = forward(products);  // grad mode on: LibTorch's linear
    EXPECT_EQ(products, 0) << "eval mode with gradients";
    {
      const torch::NoGradGuard no_grad;
      forward(products);
      EXPECT_EQ(products, 0) << "outside a scope";
      const spread::PackedWeightsScope scope;
      const auto packed = forward(products);
      EXPECT_EQ(products, 4 * cfg.n_layer + 1) << "eval mode without gradients";
      EXPECT_TRUE(torch::allclose(packed, unpacked, 1e-5, 1e-5)) << (packed - unpacked).abs().max().item<float>();
      model->train();
      forward(products);
      EXPECT_EQ(products, 0) << "training mode without gradients";
    }
  }
}
