#include "spread/model/direct_linear.h"

#include "spread/model/recompute.h"
#include "spread/runtime/direct_mm.h"

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

// x_low [rows, in] and w_low [out, in] in the products' dtype: float32 [..shape.., out] = x W^T + b, allocated in
// its final shape (a view made in a custom Function's forward could not be modified in place later). The bias goes
// in as C with beta 1, so the GEMM adds the product to it instead of a pass that reads y again.
at::Tensor product(const at::Tensor& x_low, const at::Tensor& w_low, const c10::optional<at::Tensor>& bias,
                   const std::vector<int64_t>& shape) {
  auto y = bias ? bias->to(at::kFloat).expand(shape).contiguous() : at::empty(shape, x_low.options().dtype(at::kFloat));
  auto y2 = y.view({-1, w_low.size(0)});
  if (bias)
    direct_addmm_(y2, x_low, w_low.t());
  else
    direct_mm_out(y2, x_low, w_low.t());
  return y;
}

void check_shapes(const at::Tensor& x, const at::Tensor& weight) {
  TORCH_CHECK(weight.dim() == 2 && x.dim() >= 1 && x.size(-1) == weight.size(1), "direct_linear: input ", x.sizes(),
              " against weight ", weight.sizes());
}

struct DirectLinear : torch::autograd::Function<DirectLinear> {
  // dtype: the products' (kBFloat16 or kFloat).
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const c10::optional<at::Tensor>& bias, at::ScalarType dtype) {
    check_shapes(x, weight);
    auto x2 = x.reshape({-1, weight.size(1)});
    ctx->saved_data["has_bias"] = bias.has_value();
    ctx->saved_data["dtype"] = static_cast<int64_t>(dtype);
    auto x_low = x2.to(dtype), w_low = weight.to(dtype);  // no copies in float32
    ctx->save_for_backward({x_low, w_low});
    return product(x_low, w_low, bias, with_last(x.sizes(), weight.size(0)));
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    // Grad mode is on in backward only under create_graph; the products below are not differentiable.
    TORCH_CHECK(!at::GradMode::is_enabled(), "direct_linear: first-order gradients only (no create_graph)");
    const auto saved = ctx->get_saved_variables();
    const auto &x_op = saved[0], &w_op = saved[1];  // the products' operands, in their dtype
    const bool want_x = ctx->needs_input_grad(0), want_w = ctx->needs_input_grad(1);
    const bool want_b = ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(2);
    auto g = grads[0].reshape({-1, w_op.size(0)});
    at::Tensor dx, dw, db;
    if (want_x || want_w) {
      auto g_op = g.to(static_cast<at::ScalarType>(ctx->saved_data["dtype"].toInt()));
      if (want_x) dx = direct_mm(g_op, w_op).view(with_last(grads[0].sizes(), w_op.size(1)));
      if (want_w) dw = direct_mm(g_op.t(), x_op);
    }
    if (want_b) db = g.sum(0);
    return {dx, dw, db, at::Tensor()};
  }
};

}  // namespace

bool takes_direct_gemm(const at::Tensor& x, at::ScalarType dtype, bool training) {
  if (!x.is_cpu() || x.scalar_type() != at::kFloat) return false;
  // Float32 inference stays on LibTorch's linear (OpenBLAS).
  if (dtype == at::kFloat && !training) return false;
  return has_direct_mm(dtype);
}

at::Tensor direct_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, at::ScalarType dtype) {
  return DirectLinear::apply(x, weight, optional_input(bias), dtype);
}

at::Tensor direct_linear_product(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                                 at::ScalarType dtype) {
  check_shapes(x, weight);
  const at::NoGradGuard no_grad;
  return product(x.reshape({-1, weight.size(1)}).to(dtype), weight.to(dtype), optional_input(bias),
                 with_last(x.sizes(), weight.size(0)));
}

}  // namespace spread
