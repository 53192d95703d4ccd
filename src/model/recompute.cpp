#include "spread/model/recompute.h"

#include "spread/model/direct_linear.h"
#include "spread/runtime/direct_mm.h"
#include "spread/runtime/fast_math.h"
#include "spread/runtime/packed_linear.h"
#include "spread/runtime/vectorize.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include <algorithm>
#include <cmath>
#include <utility>

namespace spread {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Exact GELU, x Phi(x), and its derivative Phi(x) + x phi(x) on CPU float32: LibTorch 1.13 hands at::gelu to a
// oneDNN kernel and computes gelu_backward with erf and exp per element; these vectorized loops in parallel
// chunks are a single pass each.
SPREAD_VECTOR_CLONES void gelu_loop(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * normal_cdf(x[i]);
}

// The same loop with a bias added to each row of x first, for a rows x cols block: y = gelu(x + bias).
SPREAD_VECTOR_CLONES void bias_gelu_rows(const float* x, const float* bias, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j) {
      const float v = x[r * cols + j] + bias[j];
      y[r * cols + j] = v * normal_cdf(v);
    }
}

// The gated MLPs' activations with their derivatives: SiLU a sigma(a) (SwiGLU) and the exact GELU a Phi(a) (GeGLU).
SPREAD_INLINE_INTO_CLONES float silu_and_derivative(float a, float& derivative) {
  const float e = exp_nonpositive(-std::abs(a));            // e^-|a|: no overflow on either side
  const float sigma = (a >= 0.0f ? 1.0f : e) / (1.0f + e);  // 1 / (1 + e^-a)
  derivative = sigma * (1.0f + a * (1.0f - sigma));
  return a * sigma;
}

SPREAD_INLINE_INTO_CLONES float gelu_and_derivative(float a, float& derivative) {
  constexpr float kInvSqrt2Pi = 0.398942280401432678f;
  const float cdf = normal_cdf(a);
  derivative = cdf + a * kInvSqrt2Pi * exp_nonpositive(-0.5f * a * a);
  return a * cdf;
}

// Backward's pass over a rows x cols block, with v = x + bias: the recomputed activation y = v Phi(v) (for dW)
// and out = grad * (Phi(v) + v phi(v)) (dL/dx), whose column sums (the bias gradient) are added to column_sum.
// One evaluation of Phi(v) serves both. The sums are added in a loop of their own after each row, as in
// residual_norm_backward_rows (model/residual_norm.cpp), not among the row's stores.
SPREAD_VECTOR_CLONES void bias_gelu_and_backward_rows(const float* __restrict grad, const float* __restrict x,
                                                      const float* __restrict bias, float* __restrict y,
                                                      float* __restrict out, float* __restrict column_sum, int64_t rows,
                                                      int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t row = r * cols;  // the row's first element
    for (int64_t j = 0; j < cols; ++j) {
      float derivative;
      y[row + j] = gelu_and_derivative(x[row + j] + bias[j], derivative);
      out[row + j] = grad[row + j] * derivative;
    }
    for (int64_t j = 0; j < cols; ++j) column_sum[j] += out[row + j];
  }
}

bool own_gelu_applies(const at::Tensor& x) { return x.is_cpu() && x.scalar_type() == at::kFloat && x.is_contiguous(); }

// Rows per chunk of the bias loops: the chunks (and so the order of the bias gradient's sums) do not depend on
// the number of threads, so a run's numbers do not either.
constexpr int64_t kBiasRowsPerChunk = 32;

// gelu(h + bias) for h = [..., n] and bias = [n].
at::Tensor bias_gelu(const at::Tensor& h, const at::Tensor& bias) {
  if (!own_gelu_applies(h) || !own_gelu_applies(bias)) return at::gelu(h + bias);
  auto y = at::empty_like(h);
  const int64_t cols = bias.numel(), rows = h.numel() / cols;
  const float *x = h.data_ptr<float>(), *b = bias.data_ptr<float>();
  float* out = y.data_ptr<float>();
  at::parallel_for(0, rows, kBiasRowsPerChunk, [&](int64_t r0, int64_t r1) {
    bias_gelu_rows(x + r0 * cols, b, out + r0 * cols, r1 - r0, cols);
  });
  return y;
}

struct GeluBackward {
  at::Tensor activation;  // gelu(h + bias), recomputed
  at::Tensor grad_h;      // grad * gelu'(h + bias)
  at::Tensor grad_bias;   // grad_h summed over every dimension but the last; undefined without a bias
};

// The GELU node's backward pass in one loop (bias_gelu_and_backward_rows); bias may be undefined (then treated as
// zero).
GeluBackward gelu_and_backward(const at::Tensor& grad, const at::Tensor& h, const at::Tensor& bias) {
  const int64_t cols = h.size(-1), rows = h.numel() / cols;
  if (!own_gelu_applies(h) || !own_gelu_applies(grad) || (bias.defined() && !own_gelu_applies(bias))) {
    const at::Tensor x = bias.defined() ? h + bias : h;
    auto grad_h = at::gelu_backward(grad, x);
    return {at::gelu(x), grad_h, bias.defined() ? grad_h.reshape({rows, cols}).sum(0) : at::Tensor()};
  }
  const at::Tensor b = bias.defined() ? bias : at::zeros({cols}, h.options());
  const int64_t chunks = (rows + kBiasRowsPerChunk - 1) / kBiasRowsPerChunk;
  auto activation = at::empty_like(h), grad_h = at::empty_like(h);
  auto partial = at::zeros({chunks, cols}, h.options());  // one row of column sums per chunk
  const float *g = grad.data_ptr<float>(), *x = h.data_ptr<float>(), *bias_data = b.data_ptr<float>();
  float *y = activation.data_ptr<float>(), *out = grad_h.data_ptr<float>(), *sums = partial.data_ptr<float>();
  at::parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t r0 = c * kBiasRowsPerChunk, r1 = std::min(rows, r0 + kBiasRowsPerChunk), at_row = r0 * cols;
      bias_gelu_and_backward_rows(g + at_row, x + at_row, bias_data, y + at_row, out + at_row, sums + c * cols,
                                  r1 - r0, cols);
    }
  });
  return {activation, grad_h, bias.defined() ? partial.sum(0) : at::Tensor()};
}

at::Tensor exact_gelu(const at::Tensor& x) {
  if (!own_gelu_applies(x)) return at::gelu(x);
  auto y = at::empty_like(x);
  const float* in = x.data_ptr<float>();
  float* out = y.data_ptr<float>();
  at::parallel_for(0, x.numel(), 16384, [&](int64_t b, int64_t e) { gelu_loop(in + b, out + b, e - b); });
  return y;
}

template <bool kSilu>
SPREAD_INLINE_INTO_CLONES float gated_activation(float a, float& derivative) {
  return kSilu ? silu_and_derivative(a, derivative) : gelu_and_derivative(a, derivative);
}

// m = act(a) * b for `rows` rows of h = [a | b], each 2 * width wide.
template <bool kSilu>
SPREAD_INLINE_INTO_CLONES void gated_rows_of(const float* __restrict h, float* __restrict m, int64_t rows,
                                             int64_t width) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *a = h + r * 2 * width, *b = a + width;
    float* y = m + r * width;
    for (int64_t j = 0; j < width; ++j) {
      float unused;
      y[j] = gated_activation<kSilu>(a[j], unused) * b[j];
    }
  }
}

// Backward's pass over `rows` rows: the recomputed m = act(a) * b (for dW) and dL/dh = [g b act'(a) | g act(a)]
// for g = dL/dm. One evaluation of the activation serves all three.
template <bool kSilu>
SPREAD_INLINE_INTO_CLONES void gated_and_backward_rows_of(const float* __restrict grad_m, const float* __restrict h,
                                                          float* __restrict m, float* __restrict grad_h, int64_t rows,
                                                          int64_t width) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *a = h + r * 2 * width, *b = a + width, *g = grad_m + r * width;
    float *y = m + r * width, *grad_a = grad_h + r * 2 * width, *grad_b = grad_a + width;
    for (int64_t j = 0; j < width; ++j) {
      float derivative;
      const float act = gated_activation<kSilu>(a[j], derivative);
      y[j] = act * b[j];
      grad_a[j] = g[j] * b[j] * derivative;
      grad_b[j] = g[j] * act;
    }
  }
}

// The activation is chosen outside the loops: a choice inside keeps them from vectorizing.
SPREAD_VECTOR_CLONES void gated_rows(const float* h, float* m, int64_t rows, int64_t width, bool silu) {
  silu ? gated_rows_of<true>(h, m, rows, width) : gated_rows_of<false>(h, m, rows, width);
}

SPREAD_VECTOR_CLONES void gated_and_backward_rows(const float* grad_m, const float* h, float* m, float* grad_h,
                                                  int64_t rows, int64_t width, bool silu) {
  silu ? gated_and_backward_rows_of<true>(grad_m, h, m, grad_h, rows, width)
       : gated_and_backward_rows_of<false>(grad_m, h, m, grad_h, rows, width);
}

at::Tensor gated_activation_reference(const at::Tensor& a, bool silu) { return silu ? at::silu(a) : at::gelu(a); }

// m = act(a) * b for h = [a | b] ([..., 2W]) -> [..., W].
at::Tensor gated(const at::Tensor& h, bool silu) {
  const int64_t width = h.size(-1) / 2;
  if (!own_gelu_applies(h))
    return gated_activation_reference(h.narrow(-1, 0, width), silu) * h.narrow(-1, width, width);
  auto sizes = h.sizes().vec();
  sizes.back() = width;
  auto m = at::empty(sizes, h.options());
  const int64_t rows = h.numel() / (2 * width);
  const float* in = h.data_ptr<float>();
  float* out = m.data_ptr<float>();
  at::parallel_for(0, rows, kBiasRowsPerChunk, [&](int64_t r0, int64_t r1) {
    gated_rows(in + r0 * 2 * width, out + r0 * width, r1 - r0, width, silu);
  });
  return m;
}

struct GatedBackward {
  at::Tensor product;  // act(a) * b, recomputed
  at::Tensor grad_h;   // [dL/da | dL/db]
};

GatedBackward gated_and_backward(const at::Tensor& grad_m, const at::Tensor& h, bool silu) {
  const int64_t width = h.size(-1) / 2;
  if (!own_gelu_applies(h) || !own_gelu_applies(grad_m)) {
    const auto a = h.narrow(-1, 0, width), b = h.narrow(-1, width, width);
    const auto act = gated_activation_reference(a, silu), grad_act = grad_m * b;
    const auto grad_a = silu ? at::silu_backward(grad_act, a) : at::gelu_backward(grad_act, a);
    return {act * b, at::cat({grad_a, grad_m * act}, -1)};
  }
  auto product = at::empty_like(grad_m), grad_h = at::empty_like(h);
  const int64_t rows = h.numel() / (2 * width);
  const float *g = grad_m.data_ptr<float>(), *in = h.data_ptr<float>();
  float *m = product.data_ptr<float>(), *out = grad_h.data_ptr<float>();
  at::parallel_for(0, rows, kBiasRowsPerChunk, [&](int64_t r0, int64_t r1) {
    gated_and_backward_rows(g + r0 * width, in + r0 * 2 * width, m + r0 * width, out + r0 * 2 * width, r1 - r0,
                            width, silu);
  });
  return {product, grad_h};
}

struct AttentionCore : torch::autograd::Function<AttentionCore> {
  // mask and bias are optionals: LibTorch's custom functions take an undefined input only that way.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& qkv, const c10::optional<at::Tensor>& mask,
                            int64_t batch) {
    const double scale = 1.0 / std::sqrt(double(qkv.size(-1)));
    const at::Tensor m = mask.value_or(at::Tensor());
    auto probs = attention_probs(qkv[0], qkv[1], m, batch, scale);
    ctx->save_for_backward({qkv});
    if (m.defined()) ctx->saved_data["mask"] = m;  // a constant: no gradient, no version check needed
    ctx->saved_data["batch"] = batch;
    return at::bmm(probs, qkv[2]);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const at::Tensor& qkv = saved[0];
    const int64_t batch = ctx->saved_data["batch"].toInt();
    const double scale = 1.0 / std::sqrt(double(qkv.size(-1)));
    auto q = qkv[0], k = qkv[1], v = qkv[2];
    const auto mask = ctx->saved_data.find("mask");
    auto probs = attention_probs(q, k, mask == ctx->saved_data.end() ? at::Tensor() : mask->second.toTensor(), batch,
                                 scale);
    auto grad_y = grads[0].contiguous();
    auto grad_qkv = at::empty_like(qkv);
    auto grad_q = grad_qkv.select(0, 0), grad_k = grad_qkv.select(0, 1), grad_v = grad_qkv.select(0, 2);
    at::bmm_out(grad_v, probs.transpose(1, 2), grad_y);
    // The forward's 1/sqrt(D) is folded into v here (softmax's backward is linear in its incoming gradient): one
    // pass over [B*H, T, D] instead of one over the T/D times larger [B*H, T, T] scores.
    auto grad_probs = at::bmm(grad_y, (v * scale).transpose(1, 2));
    auto grad_scores = at::_softmax_backward_data(grad_probs, probs, -1, probs.scalar_type());
    at::bmm_out(grad_q, grad_scores, k);
    at::bmm_out(grad_k, grad_scores.transpose(1, 2), q);
    return {grad_qkv, at::Tensor(), at::Tensor()};
  }
};

// linear(a, weight, bias) with the product in `low` (kFloat, or kBFloat16 for a float32 a; see mixed_linear);
// direct_gemm: takes_direct_gemm, as the node's maker found it (model/direct_linear.h).
at::Tensor low_linear(const at::Tensor& a, const at::Tensor& weight, const at::Tensor& bias, at::ScalarType low,
                      bool direct_gemm) {
  if (direct_gemm) return direct_linear_product(a, weight, bias, low);
  if (low == a.scalar_type()) return at::linear(a, weight, bias);
  auto y = at::linear(a.to(low), weight.to(low)).to(a.scalar_type());
  return bias.defined() ? y.add_(bias) : y;
}

// Backward of low_linear for a node that recomputes its activation a: dL/da first (the recompute loop turns it into
// the gradient of the node's input), then dL/dW from the recomputed a.
class LowLinearBackward {
 public:
  LowLinearBackward(const at::Tensor& grad_out, const at::Tensor& weight, at::ScalarType low,
                    at::ScalarType activation_dtype, bool direct_gemm)
      : weight_(weight), low_(low), mixed_(low != activation_dtype), gemm_(direct_gemm),
        activation_dtype_(activation_dtype),
        grad_out_(grad_out.reshape({-1, weight.size(0)})),
        grad_low_(mixed_ ? grad_out_.to(low) : grad_out_) {}

  at::Tensor grad_bias() const { return grad_out_.sum(0); }
  at::Tensor grad_activation() const {
    if (gemm_) return direct_mm(grad_low_, mixed_ ? weight_.to(low_) : weight_);
    auto g = grad_low_.mm(mixed_ ? weight_.to(low_) : weight_);
    return mixed_ ? g.to(activation_dtype_) : g;
  }
  at::Tensor grad_weight(const at::Tensor& activation) const {
    const auto a = activation.reshape({-1, weight_.size(1)});
    if (gemm_) return direct_mm(grad_low_.t(), mixed_ ? a.to(low_) : a);
    return mixed_ ? grad_low_.t().mm(a.to(low_)).to(weight_.scalar_type()) : grad_low_.t().mm(a);
  }

 private:
  at::Tensor weight_;
  at::ScalarType low_;
  bool mixed_;
  bool gemm_;  // the products through runtime/direct_mm, written in float32 (model/direct_linear.h)
  at::ScalarType activation_dtype_;
  at::Tensor grad_out_, grad_low_;
};

// What GeluLinear and GatedLinear keep for their LowLinearBackward.
void save_products(AutogradContext* ctx, at::ScalarType matmul_dtype, bool direct_gemm) {
  ctx->saved_data["matmul_dtype"] = static_cast<int64_t>(matmul_dtype);
  ctx->saved_data["direct_gemm"] = direct_gemm;
}

LowLinearBackward low_linear_backward(AutogradContext* ctx, const at::Tensor& grad_out, const at::Tensor& weight,
                                      const at::Tensor& activation_input) {
  return LowLinearBackward(grad_out, weight, static_cast<at::ScalarType>(ctx->saved_data["matmul_dtype"].toInt()),
                           activation_input.scalar_type(), ctx->saved_data["direct_gemm"].toBool());
}

struct GeluLinear : torch::autograd::Function<GeluLinear> {
  // linear(gelu(h + h_bias), weight, bias). matmul_dtype: the products' dtype (kFloat, or kBFloat16 for a float32
  // h and weight); see mixed_linear. h_bias is the bias of the product that made h, added here so that its
  // gradient is summed in the GELU-backward loop instead of in a pass of its own.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& h, const c10::optional<at::Tensor>& h_bias,
                            const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                            at::ScalarType matmul_dtype, bool direct_gemm) {
    const at::Tensor b = bias.value_or(at::Tensor()), hb = h_bias.value_or(at::Tensor());
    ctx->save_for_backward({h, weight, hb});
    ctx->saved_data["has_bias"] = b.defined();
    save_products(ctx, matmul_dtype, direct_gemm);
    return low_linear(activation(h, hb), weight, b, matmul_dtype, direct_gemm);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const at::Tensor &h = saved[0], &weight = saved[1], &h_bias = saved[2];
    const LowLinearBackward linear = low_linear_backward(ctx, grads[0], weight, h);
    GeluBackward g = gelu_and_backward(linear.grad_activation().view(h.sizes()), h, h_bias);
    return {g.grad_h, g.grad_bias, linear.grad_weight(g.activation),
            ctx->saved_data["has_bias"].toBool() ? linear.grad_bias() : at::Tensor(), at::Tensor(), at::Tensor()};
  }

  static at::Tensor activation(const at::Tensor& h, const at::Tensor& h_bias) {
    return h_bias.defined() ? bias_gelu(h, h_bias) : exact_gelu(h);
  }
};

struct GatedLinear : torch::autograd::Function<GatedLinear> {
  // linear(act(a) * b, weight, bias) for h = [a | b]; matmul_dtype as GeluLinear's.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& h, const at::Tensor& weight,
                            const c10::optional<at::Tensor>& bias, bool silu, at::ScalarType matmul_dtype,
                            bool direct_gemm) {
    const at::Tensor b = bias.value_or(at::Tensor());
    ctx->save_for_backward({h, weight});
    ctx->saved_data["has_bias"] = b.defined();
    ctx->saved_data["silu"] = silu;
    save_products(ctx, matmul_dtype, direct_gemm);
    return low_linear(gated(h, silu), weight, b, matmul_dtype, direct_gemm);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const at::Tensor &h = saved[0], &weight = saved[1];
    const LowLinearBackward linear = low_linear_backward(ctx, grads[0], weight, h);
    auto sizes = h.sizes().vec();
    sizes.back() /= 2;
    GatedBackward g = gated_and_backward(linear.grad_activation().view(sizes), h, ctx->saved_data["silu"].toBool());
    return {g.grad_h, linear.grad_weight(g.product),
            ctx->saved_data["has_bias"].toBool() ? linear.grad_bias() : at::Tensor(), at::Tensor(), at::Tensor(),
            at::Tensor()};
  }
};

}  // namespace

at::Tensor attention_probs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& mask, int64_t batch,
                           double scale) {
  const int64_t BH = q.size(0), T = q.size(1);
  auto kt = k.transpose(1, 2);
  at::Tensor scores;
  if (mask.defined() && mask.size(0) == 1) {
    scores = at::baddbmm(mask.select(0, 0).select(0, 0).expand({BH, T, T}), q, kt, 1.0, scale);
  } else {
    scores = at::bmm(q * scale, kt);  // scaling q is a pass T/D times smaller than scaling the scores
    if (mask.defined()) scores.view({batch, BH / batch, T, T}).add_(mask);
  }
  return at::_softmax(scores, -1, false);
}

at::Tensor attention_core(const at::Tensor& qkv, const at::Tensor& mask, int64_t batch) {
  return AttentionCore::apply(qkv, optional_input(mask), batch);
}

at::Tensor gelu_linear(const at::Tensor& h, const at::Tensor& weight, const at::Tensor& bias,
                       at::ScalarType matmul_dtype, const at::Tensor& h_bias, bool training) {
  // As mixed_linear: only a float32 h is multiplied in a narrower dtype.
  if (matmul_dtype == at::kFloat || h.scalar_type() != at::kFloat) matmul_dtype = h.scalar_type();
  // Inference: nothing to recompute, and the weight packed once (runtime/packed_linear.h).
  if (takes_packed_linear(h, weight, matmul_dtype, training))
    return packed_linear(GeluLinear::activation(h, h_bias), weight, bias);
  return GeluLinear::apply(h, optional_input(h_bias), weight, optional_input(bias), matmul_dtype,
                           takes_direct_gemm(h, matmul_dtype, training));
}

at::Tensor gated_linear(const at::Tensor& h, const at::Tensor& weight, const at::Tensor& bias, bool silu,
                        at::ScalarType matmul_dtype, bool training) {
  if (matmul_dtype == at::kFloat || h.scalar_type() != at::kFloat) matmul_dtype = h.scalar_type();
  if (takes_packed_linear(h, weight, matmul_dtype, training))
    return packed_linear(gated(h.contiguous(), silu), weight, bias);
  return GatedLinear::apply(h.contiguous(), weight, optional_input(bias), silu, matmul_dtype,
                            takes_direct_gemm(h, matmul_dtype, training));
}

}  // namespace spread
