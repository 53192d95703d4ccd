#include "spread/model/bf16_linear.h"

#include "spread/model/recompute.h"
#include "spread/runtime/bf16_mm.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

namespace spread {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

std::vector<int64_t> with_last(at::IntArrayRef sizes, int64_t last) {
  auto shape = sizes.vec();
  shape.back() = last;
  return shape;
}

// x_low [rows, in] and w_low [out, in] in bf16: float32 [..shape.., out] = x W^T + b, allocated in its final shape
// (a view made in a custom Function's forward could not be modified in place later). The bias goes in as C with
// beta 1, so the GEMM adds the product to it instead of a pass that reads y again.
at::Tensor product(const at::Tensor& x_low, const at::Tensor& w_low, const c10::optional<at::Tensor>& bias,
                   const std::vector<int64_t>& shape) {
  const int64_t out = w_low.size(0);
  if (!bias) {
    auto y = at::empty(shape, x_low.options().dtype(at::kFloat));
    auto y2 = y.view({-1, out});
    bf16_mm_out(y2, x_low, w_low.t());
    return y;
  }
  auto y = bias->to(at::kFloat).expand(shape).contiguous();
  auto y2 = y.view({-1, out});
  bf16_addmm_(y2, x_low, w_low.t());
  return y;
}

void check_shapes(const at::Tensor& x, const at::Tensor& weight) {
  TORCH_CHECK(weight.dim() == 2 && x.dim() >= 1 && x.size(-1) == weight.size(1), "bf16_linear: input ", x.sizes(),
              " against weight ", weight.sizes());
}

struct Bf16Linear : torch::autograd::Function<Bf16Linear> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const c10::optional<at::Tensor>& bias) {
    check_shapes(x, weight);
    auto x_low = x.reshape({-1, weight.size(1)}).to(at::kBFloat16);
    auto w_low = weight.to(at::kBFloat16);
    ctx->save_for_backward({x_low, w_low});
    ctx->saved_data["has_bias"] = bias.has_value();
    return product(x_low, w_low, bias, with_last(x.sizes(), weight.size(0)));
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &x_low = saved[0], &w_low = saved[1];
    const bool want_x = ctx->needs_input_grad(0), want_w = ctx->needs_input_grad(1);
    const bool want_b = ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(2);
    auto g = grads[0].reshape({-1, w_low.size(0)});
    at::Tensor dx, dw, db;
    if (want_x || want_w) {
      auto g_low = g.to(at::kBFloat16);
      if (want_x) dx = bf16_mm(g_low, w_low).view(with_last(grads[0].sizes(), w_low.size(1)));
      if (want_w) dw = bf16_mm(g_low.t(), x_low);
    }
    if (want_b) db = g.sum(0);
    return {dx, dw, db};
  }
};

}  // namespace

bool takes_bf16_gemm(const at::Tensor& x) { return x.is_cpu() && x.scalar_type() == at::kFloat && has_bf16_gemm(); }

at::Tensor bf16_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  return Bf16Linear::apply(x, weight, optional_input(bias));
}

at::Tensor bf16_linear_product(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  check_shapes(x, weight);
  const at::NoGradGuard no_grad;
  return product(x.reshape({-1, weight.size(1)}).to(at::kBFloat16), weight.to(at::kBFloat16), optional_input(bias),
                 with_last(x.sizes(), weight.size(0)));
}

}  // namespace spread
