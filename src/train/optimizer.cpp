#include "spread/train/optimizer.h"

#include <ATen/Parallel.h>

#include "spread/runtime/vectorize.h"

#include <cmath>

namespace spread {
namespace {

struct AdamWStep {
  float b1, b2, eps, grad_scale, step_size, inv_sqrt_bc2, decay;
};

SPREAD_VECTOR_CLONES void adamw_update(const AdamWStep& s, float* __restrict p, const float* __restrict g,
                                       float* __restrict m, float* __restrict v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] * s.grad_scale;
    m[i] = s.b1 * m[i] + (1.0f - s.b1) * gi;
    v[i] = s.b2 * v[i] + (1.0f - s.b2) * gi * gi;
    p[i] = p[i] * s.decay - s.step_size * m[i] / (std::sqrt(v[i]) * s.inv_sqrt_bc2 + s.eps);
  }
}

// One pass over memory per group: scale, moments, decay and update together.
void fused_adamw_cpu(ParamGroup& g, double grad_scale) {
  const auto& o = g.options;
  const AdamWStep s{float(o.beta1),
                    float(o.beta2),
                    float(o.eps),
                    float(grad_scale),
                    float(o.lr / (1.0 - std::pow(o.beta1, double(g.step)))),
                    float(1.0 / std::sqrt(1.0 - std::pow(o.beta2, double(g.step)))),
                    float(1.0 - o.lr * o.weight_decay)};
  float* p = g.data.data_ptr<float>();
  const float* gr = g.grad.data_ptr<float>();
  float* m = g.exp_avg.data_ptr<float>();
  float* v = g.exp_avg_sq.data_ptr<float>();
  at::parallel_for(0, g.data.numel(), 16384, [&](int64_t begin, int64_t end) {
    adamw_update(s, p + begin, gr + begin, m + begin, v + begin, end - begin);
  });
}

void adamw_tensor_ops(ParamGroup& g, double grad_scale) {
  const auto& o = g.options;
  auto grad = grad_scale == 1.0 ? g.grad : g.grad * grad_scale;
  g.exp_avg.lerp_(grad, 1.0 - o.beta1);
  g.exp_avg_sq.mul_(o.beta2).addcmul_(grad, grad, 1.0 - o.beta2);
  g.data.mul_(1.0 - o.lr * o.weight_decay);
  auto denom = (g.exp_avg_sq.sqrt() / std::sqrt(1.0 - std::pow(o.beta2, double(g.step)))).add_(o.eps);
  g.data.addcdiv_(g.exp_avg, denom, -o.lr / (1.0 - std::pow(o.beta1, double(g.step))));
}

}  // namespace

void FlatAdamW::add_group(const std::string& name, std::vector<torch::Tensor> params, const AdamWOptions& options) {
  torch::NoGradGuard no_grad;
  ParamGroup g;
  g.name = name;
  g.options = options;
  int64_t total = 0;
  for (const auto& p : params) total += p.numel();
  auto opts = params.empty() ? torch::TensorOptions(torch::kFloat) : params.front().options();
  g.data = torch::empty({total}, opts);
  g.grad = torch::zeros({total}, opts);
  g.exp_avg = torch::zeros({total}, opts);
  g.exp_avg_sq = torch::zeros({total}, opts);
  int64_t offset = 0;
  for (auto& p : params) {
    auto n = p.numel();
    auto value = g.data.narrow(0, offset, n).view(p.sizes());
    value.copy_(p);
    p.set_data(value);
    // Autograd accumulates in place into a defined gradient, so every backward writes into g.grad.
    p.mutable_grad() = g.grad.narrow(0, offset, n).view(p.sizes());
    offset += n;
  }
  g.params = std::move(params);
  groups_.push_back(std::move(g));
}

void FlatAdamW::zero_grad() {
  for (auto& g : groups_) g.grad.zero_();
}

double FlatAdamW::grad_norm() const {
  double sq = 0;
  for (const auto& g : groups_) {
    if (g.grad.numel() == 0) continue;
    double n = g.grad.norm().item<double>();
    sq += n * n;
  }
  return std::sqrt(sq);
}

void FlatAdamW::step(double grad_scale) {
  torch::NoGradGuard no_grad;
  for (auto& g : groups_) {
    if (g.data.numel() == 0) continue;
    ++g.step;
    if (g.data.is_cpu() && g.data.scalar_type() == torch::kFloat) fused_adamw_cpu(g, grad_scale);
    else adamw_tensor_ops(g, grad_scale);
  }
}

void FlatAdamW::set_lr(double lr) {
  for (auto& g : groups_) g.options.lr = lr;
}

void split_decay_groups(const std::vector<NamedParam>& params, std::vector<torch::Tensor>& decay,
                        std::vector<torch::Tensor>& no_decay) {
  for (const auto& p : params) (p.tensor.dim() >= 2 ? decay : no_decay).push_back(p.tensor);
}

}  // namespace spread
