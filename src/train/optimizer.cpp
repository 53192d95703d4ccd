#include "spread/train/optimizer.h"

#include <ATen/Parallel.h>

#include <cmath>

namespace spread {
namespace {

// One pass over memory per group: scale, moments, decay and update together.
void fused_adamw_cpu(ParamGroup& g, double grad_scale) {
  const auto& o = g.options;
  const float b1 = float(o.beta1), b2 = float(o.beta2), eps = float(o.eps), scale = float(grad_scale);
  const float step_size = float(o.lr / (1.0 - std::pow(o.beta1, double(g.step))));
  const float inv_sqrt_bc2 = float(1.0 / std::sqrt(1.0 - std::pow(o.beta2, double(g.step))));
  const float decay = float(1.0 - o.lr * o.weight_decay);
  float* p = g.data.data_ptr<float>();
  const float* gr = g.grad.data_ptr<float>();
  float* m = g.exp_avg.data_ptr<float>();
  float* v = g.exp_avg_sq.data_ptr<float>();
  at::parallel_for(0, g.data.numel(), 16384, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float gi = gr[i] * scale;
      m[i] = b1 * m[i] + (1.0f - b1) * gi;
      v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
      p[i] = p[i] * decay - step_size * m[i] / (std::sqrt(v[i]) * inv_sqrt_bc2 + eps);
    }
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
