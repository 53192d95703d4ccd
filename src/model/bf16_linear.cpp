#include "spread/model/bf16_linear.h"

#include "spread/model/recompute.h"
#include "spread/runtime/gemm.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

namespace spread {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// How the GEMM reads a matrix: row-major as it is, or as the transpose of a row-major one. Anything else is
// copied first.
struct Operand {
  at::Tensor data;  // the tensor whose memory is read (kept alive for the call)
  bool transposed = false;
  int64_t ld = 0;
};

Operand as_operand(const at::Tensor& t) {
  TORCH_CHECK(t.dim() == 2 && t.scalar_type() == at::kBFloat16 && t.is_cpu(),
              "bf16_mm: takes 2-d bf16 CPU matrices, got ", t.sizes(), " ", t.scalar_type());
  if (t.is_contiguous()) return {t, false, std::max<int64_t>(t.size(1), 1)};
  if (t.t().is_contiguous()) return {t, true, std::max<int64_t>(t.size(0), 1)};
  return {t.contiguous(), false, std::max<int64_t>(t.size(1), 1)};
}

const Bf16* bits(const at::Tensor& t) { return reinterpret_cast<const Bf16*>(t.data_ptr<at::BFloat16>()); }

void gemm_into(at::Tensor& c, const at::Tensor& a, const at::Tensor& b, float beta) {
  TORCH_CHECK(a.size(1) == b.size(0), "bf16_mm: ", a.sizes(), " times ", b.sizes());
  TORCH_CHECK(c.is_contiguous() && c.scalar_type() == at::kFloat && c.size(0) == a.size(0) && c.size(1) == b.size(1),
              "bf16_mm: the output must be contiguous float32 [", a.size(0), ", ", b.size(1), "]");
  const int64_t m = a.size(0), n = b.size(1), k = a.size(1);
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (beta == 0) c.zero_();
    return;
  }
  const Operand A = as_operand(a), B = as_operand(b);
  row_major_gemm(A.transposed, B.transposed, m, n, k, 1.0f, bits(A.data), A.ld, bits(B.data), B.ld, beta,
                 c.data_ptr<float>(), std::max<int64_t>(n, 1));
}

struct Bf16Linear : torch::autograd::Function<Bf16Linear> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const c10::optional<at::Tensor>& bias) {
    const int64_t in = weight.size(1), out = weight.size(0);
    auto x_low = x.reshape({-1, in}).to(at::kBFloat16);
    auto w_low = weight.to(at::kBFloat16);
    at::Tensor y;
    if (bias) {  // the bias as C with beta 1: the GEMM adds the product to it, no pass of its own
      y = bias->to(at::kFloat).expand({x_low.size(0), out}).contiguous();
      bf16_addmm_(y, x_low, w_low.t());
    } else {
      y = bf16_mm(x_low, w_low.t());
    }
    ctx->save_for_backward({x_low, w_low});
    ctx->saved_data["has_bias"] = bias.has_value();
    auto shape = x.sizes().vec();
    shape.back() = out;
    return y.view(shape);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &x_low = saved[0], &w_low = saved[1];
    auto g = grads[0].reshape({-1, w_low.size(0)});
    auto g_low = g.to(at::kBFloat16);
    at::Tensor dx, dw, db;
    if (ctx->needs_input_grad(0)) {
      auto shape = grads[0].sizes().vec();
      shape.back() = w_low.size(1);
      dx = bf16_mm(g_low, w_low).view(shape);
    }
    if (ctx->needs_input_grad(1)) dw = bf16_mm(g_low.t(), x_low);
    if (ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(2)) db = g.sum(0);
    return {dx, dw, db};
  }
};

}  // namespace

bool takes_bf16_gemm(const at::Tensor& x) { return x.is_cpu() && x.scalar_type() == at::kFloat && has_bf16_gemm(); }

at::Tensor bf16_mm(const at::Tensor& a, const at::Tensor& b) {
  auto c = at::empty({a.size(0), b.size(1)}, a.options().dtype(at::kFloat));
  gemm_into(c, a, b, 0.0f);
  return c;
}

at::Tensor& bf16_addmm_(at::Tensor& c, const at::Tensor& a, const at::Tensor& b) {
  gemm_into(c, a, b, 1.0f);
  return c;
}

at::Tensor bf16_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  return Bf16Linear::apply(x, weight, optional_input(bias));
}

}  // namespace spread
