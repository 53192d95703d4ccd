#include "spread/model/rotary.h"

#include "spread/model/recompute.h"
#include "spread/runtime/vectorize.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace spread {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct Heads {
  int64_t H, K, D;  // query heads, k/v heads, head size
  int64_t group() const { return H / K; }
  int64_t in_width() const { return (H + 2 * K) * D; }
  int64_t out_width() const { return 3 * H * D; }
};

// y = x turned by one position's angles c, s (D values each), rotate_half's pairing.
SPREAD_INLINE_INTO_CLONES void rotate(const float* __restrict x, float* __restrict y, const float* __restrict c,
                                      const float* __restrict s, int64_t D) {
  const int64_t half = D / 2;
  for (int64_t i = 0; i < half; ++i) {
    y[i] = x[i] * c[i] - x[i + half] * s[i];
    y[i + half] = x[i + half] * c[i + half] + x[i] * s[i + half];
  }
}

// gx = R^T gy for the rotation R of `rotate`: the gradient of its input.
SPREAD_INLINE_INTO_CLONES void rotate_back(const float* __restrict gy, float* __restrict gx, const float* __restrict c,
                                           const float* __restrict s, int64_t D) {
  const int64_t half = D / 2;
  for (int64_t i = 0; i < half; ++i) {
    gx[i] = gy[i] * c[i] + gy[i + half] * s[i + half];
    gx[i + half] = gy[i + half] * c[i + half] - gy[i] * s[i];
  }
}

// x turned when there are angles, copied otherwise.
SPREAD_INLINE_INTO_CLONES void place(const float* x, float* y, const float* c, const float* s, int64_t D) {
  if (c != nullptr) {
    rotate(x, y, c, s, D);
  } else {
    std::memcpy(y, x, D * sizeof(float));
  }
}

SPREAD_INLINE_INTO_CLONES void place_back(const float* gy, float* gx, const float* c, const float* s, int64_t D) {
  if (c != nullptr) {
    rotate_back(gy, gx, c, s, D);
  } else {
    std::memcpy(gx, gy, D * sizeof(float));
  }
}

// The D values of token n's position (n of B * T) in a [T, D] table, or null without one.
SPREAD_INLINE_INTO_CLONES const float* position_row(const float* table, int64_t n, int64_t T, int64_t D) {
  return table != nullptr ? table + (n % T) * D : nullptr;
}

// Tokens n0..n1 (of B * T) of the forward pass. cos, sin: [T, D] or null.
SPREAD_VECTOR_CLONES void forward_tokens(const float* qkv, float* out, const float* cos, const float* sin, int64_t n0,
                                         int64_t n1, int64_t T, Heads l) {
  const int64_t D = l.D, G = l.group();
  for (int64_t n = n0; n < n1; ++n) {
    const float* in = qkv + n * l.in_width();
    float* y = out + n * l.out_width();
    const float *c = position_row(cos, n, T, D), *s = position_row(sin, n, T, D);
    for (int64_t h = 0; h < l.H; ++h) place(in + h * D, y + h * D, c, s, D);
    for (int64_t g = 0; g < l.K; ++g) {
      float* k_first = y + (l.H + g * G) * D;
      place(in + (l.H + g) * D, k_first, c, s, D);
      const float* v = in + (l.H + l.K + g) * D;
      for (int64_t r = 0; r < G; ++r) {
        if (r > 0) std::memcpy(k_first + r * D, k_first, D * sizeof(float));
        std::memcpy(y + (2 * l.H + g * G + r) * D, v, D * sizeof(float));
      }
    }
  }
}

// sum[0..D) = the D-value blocks src, src + D, ..., G of them.
SPREAD_INLINE_INTO_CLONES void sum_heads(const float* __restrict src, float* __restrict sum, int64_t G, int64_t D) {
  std::memcpy(sum, src, D * sizeof(float));
  for (int64_t r = 1; r < G; ++r)
    for (int64_t i = 0; i < D; ++i) sum[i] += src[r * D + i];
}

// Tokens n0..n1 of the backward pass: grad (of the [B, T, 3 H D] output) -> grad_in ([B, T, (H + 2K) D]). The
// gradients of a repeated k/v head's copies are summed, a k head's before it is turned back.
SPREAD_VECTOR_CLONES void backward_tokens(const float* grad, float* grad_in, const float* cos, const float* sin,
                                          int64_t n0, int64_t n1, int64_t T, Heads l) {
  const int64_t D = l.D, G = l.group();
  std::vector<float> k_sum(D);
  for (int64_t n = n0; n < n1; ++n) {
    const float* gy = grad + n * l.out_width();
    float* gx = grad_in + n * l.in_width();
    const float *c = position_row(cos, n, T, D), *s = position_row(sin, n, T, D);
    for (int64_t h = 0; h < l.H; ++h) place_back(gy + h * D, gx + h * D, c, s, D);
    for (int64_t g = 0; g < l.K; ++g) {
      sum_heads(gy + (l.H + g * G) * D, k_sum.data(), G, D);
      place_back(k_sum.data(), gx + (l.H + g) * D, c, s, D);
      sum_heads(gy + (2 * l.H + g * G) * D, gx + (l.H + l.K + g) * D, G, D);
    }
  }
}

constexpr int64_t kTokensPerChunk = 16;

const float* table_or_null(const at::Tensor& t) { return t.defined() ? t.data_ptr<float>() : nullptr; }

struct RotateAndRepeatHeads : torch::autograd::Function<RotateAndRepeatHeads> {
  // cos and sin: contiguous [T, D] (first T positions), or empty optionals for no rotation.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& qkv, const c10::optional<at::Tensor>& cos,
                            const c10::optional<at::Tensor>& sin, int64_t n_head, int64_t n_kv_head) {
    const int64_t B = qkv.size(0), T = qkv.size(1);
    const Heads l{n_head, n_kv_head, qkv.size(2) / (n_head + 2 * n_kv_head)};
    const at::Tensor c = cos.value_or(at::Tensor()), s = sin.value_or(at::Tensor());
    if (c.defined()) {
      ctx->saved_data["cos"] = c;  // constants: no gradient, no version check needed
      ctx->saved_data["sin"] = s;
    }
    ctx->saved_data["n_head"] = n_head;
    ctx->saved_data["n_kv_head"] = n_kv_head;
    auto out = at::empty({B, T, l.out_width()}, qkv.options());
    const float* in = qkv.data_ptr<float>();
    float* y = out.data_ptr<float>();
    at::parallel_for(0, B * T, kTokensPerChunk, [&](int64_t n0, int64_t n1) {
      forward_tokens(in, y, table_or_null(c), table_or_null(s), n0, n1, T, l);
    });
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto grad = grads[0].contiguous();
    const int64_t B = grad.size(0), T = grad.size(1);
    const int64_t n_head = ctx->saved_data["n_head"].toInt(), n_kv_head = ctx->saved_data["n_kv_head"].toInt();
    const Heads l{n_head, n_kv_head, grad.size(2) / (3 * n_head)};
    const auto table = [&](const char* key) {
      const auto it = ctx->saved_data.find(key);
      return it == ctx->saved_data.end() ? at::Tensor() : it->second.toTensor();
    };
    const at::Tensor c = table("cos"), s = table("sin");
    auto grad_in = at::empty({B, T, l.in_width()}, grad.options());
    const float* gy = grad.data_ptr<float>();
    float* gx = grad_in.data_ptr<float>();
    at::parallel_for(0, B * T, kTokensPerChunk, [&](int64_t n0, int64_t n1) {
      backward_tokens(gy, gx, table_or_null(c), table_or_null(s), n0, n1, T, l);
    });
    return {grad_in, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// The first T positions of an angle table, [T, D] contiguous.
at::Tensor first_positions(const at::Tensor& table, int64_t T, int64_t D) {
  if (!table.defined()) return table;
  TORCH_CHECK(table.numel() % D == 0 && table.numel() / D >= T, "rotate_and_repeat_heads: the angle table ",
              table.sizes(), " does not hold ", T, " positions of ", D, " values");
  return table.reshape({-1, D}).narrow(0, 0, T).contiguous();
}

// transformers' rotate_half: (x1, x2) -> (-x2, x1) over the two halves of the last dimension.
at::Tensor rotate_half(const at::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

void check_heads(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin, int64_t H, int64_t K) {
  TORCH_CHECK(H > 0 && K > 0 && H % K == 0, "rotate_and_repeat_heads: n_head = ", H,
              " must be a positive multiple of n_kv_head = ", K);
  TORCH_CHECK(qkv.dim() == 3 && qkv.size(2) % (H + 2 * K) == 0, "rotate_and_repeat_heads: qkv must be [B, T, ",
              "(H + 2K) D] for H = ", H, ", K = ", K, ", got ", qkv.sizes());
  TORCH_CHECK(cos.defined() == sin.defined(), "rotate_and_repeat_heads: cos and sin come together");
  TORCH_CHECK(!cos.defined() || (qkv.size(2) / (H + 2 * K)) % 2 == 0, "rotate_and_repeat_heads: rotary positions ",
              "need an even head size");
}

}  // namespace

at::Tensor rotate_and_repeat_heads_reference(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin,
                                             int64_t n_head, int64_t n_kv_head) {
  check_heads(qkv, cos, sin, n_head, n_kv_head);
  const int64_t B = qkv.size(0), T = qkv.size(1), H = n_head, K = n_kv_head, D = qkv.size(2) / (H + 2 * K);
  auto q = qkv.narrow(2, 0, H * D).view({B, T, H, D});
  auto k = qkv.narrow(2, H * D, K * D).view({B, T, K, D});
  auto v = qkv.narrow(2, (H + K) * D, K * D).view({B, T, K, D});
  if (cos.defined()) {
    const auto c = first_positions(cos, T, D).view({T, 1, D}), s = first_positions(sin, T, D).view({T, 1, D});
    q = q * c + rotate_half(q) * s;
    k = k * c + rotate_half(k) * s;
  }
  if (K != H) {
    k = k.unsqueeze(3).expand({B, T, K, H / K, D}).reshape({B, T, H, D});
    v = v.unsqueeze(3).expand({B, T, K, H / K, D}).reshape({B, T, H, D});
  }
  return at::cat({q.reshape({B, T, H * D}), k.reshape({B, T, H * D}), v.reshape({B, T, H * D})}, 2);
}

at::Tensor rotate_and_repeat_heads(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin,
                                   int64_t n_head, int64_t n_kv_head) {
  const bool own_loops = qkv.is_cpu() && qkv.scalar_type() == at::kFloat &&
                         (!cos.defined() || (cos.is_cpu() && cos.scalar_type() == at::kFloat &&
                                             sin.scalar_type() == at::kFloat));
  if (!own_loops) return rotate_and_repeat_heads_reference(qkv, cos, sin, n_head, n_kv_head);
  check_heads(qkv, cos, sin, n_head, n_kv_head);
  const int64_t T = qkv.size(1), D = qkv.size(2) / (n_head + 2 * n_kv_head);
  return RotateAndRepeatHeads::apply(qkv.contiguous(), optional_input(first_positions(cos, T, D)),
                                     optional_input(first_positions(sin, T, D)), n_head, n_kv_head);
}

}  // namespace spread
