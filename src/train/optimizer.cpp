#include "spread/train/optimizer.h"

#include <ATen/Parallel.h>

#include "spread/runtime/direct_mm.h"
#include "spread/runtime/vectorize.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

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

// torch.optim.Muon's quintic Newton-Schulz coefficients.
constexpr double kNsA = 3.4445, kNsB = -4.7750, kNsC = 2.0315;

torch::Tensor round_to_bf16(const torch::Tensor& t) { return t.to(torch::kBFloat16).to(torch::kFloat); }

// a b for float32 matrices that hold bfloat16 values: the bf16 GEMM (runtime/direct_mm.h: exact products, float32
// accumulation) where the process has one, else the float32 GEMM, whose products of such values are exact too.
torch::Tensor bf16_valued_mm(const torch::Tensor& a, const torch::Tensor& b) {
  if (!has_direct_mm(torch::kBFloat16)) return torch::mm(a, b);
  return direct_mm(a.to(torch::kBFloat16), b.to(torch::kBFloat16));
}

// NS in bf16 on the CPU: every product rounded to bfloat16 once, as torch.optim.Muon's bfloat16 tensors are (its
// GEMMs accumulate in float32). LibTorch 1.13's own bfloat16 matmuls accumulate more coarsely (errors of 1e-3
// where torch's are 2e-4), so the values stay float32 tensors holding bfloat16 numbers.
torch::Tensor newton_schulz_bf16_cpu(const torch::Tensor& u, const MuonOptions& o) {
  torch::Tensor x = round_to_bf16(u);
  if (u.size(0) > u.size(1)) x = x.t().contiguous();
  x = round_to_bf16(x / round_to_bf16(x.norm().clamp_min(o.eps)));
  for (int64_t i = 0; i < o.ns_steps; ++i) {
    const torch::Tensor gram = round_to_bf16(bf16_valued_mm(x, x.t()));
    const torch::Tensor poly = round_to_bf16(bf16_valued_mm(gram, gram).mul_(kNsC).add_(gram, kNsB));
    x = round_to_bf16(bf16_valued_mm(poly, x).add_(x, kNsA));
  }
  return u.size(0) > u.size(1) ? x.t() : x;
}

// An approximately orthogonal matrix with U's singular vectors (docs at the top of optimizer.h): the iteration works
// on the wide orientation, so that the Gram matrix is the smaller of the two.
torch::Tensor newton_schulz(const torch::Tensor& u, const MuonOptions& o) {
  if (o.ns_bf16 && u.is_cpu()) return newton_schulz_bf16_cpu(u, o);
  torch::Tensor x = u.to(o.ns_bf16 ? torch::kBFloat16 : torch::kFloat, /*non_blocking=*/false, /*copy=*/true);
  const bool tall = u.size(0) > u.size(1);
  if (tall) x = x.t();
  x.div_(x.norm().clamp_min(o.eps));
  for (int64_t i = 0; i < o.ns_steps; ++i) {
    const torch::Tensor gram = torch::mm(x, x.t());
    const torch::Tensor poly = torch::addmm(gram, gram, gram, /*beta=*/kNsB, /*alpha=*/kNsC);
    x = torch::addmm(x, poly, x, /*beta=*/kNsA);
  }
  return tall ? x.t() : x;
}

double muon_lr(double lr, const MuonOptions& o, int64_t rows, int64_t cols) {
  if (o.match_rms_adamw) return lr * 0.2 * std::sqrt(double(std::max(rows, cols)));
  return lr * std::sqrt(std::max(1.0, double(rows) / double(cols)));
}

void muon_step(ParamGroup& g, double grad_scale) {
  const auto& o = g.options;
  const auto& mu = g.muon;
  const torch::Tensor grad = grad_scale == 1.0 ? g.grad : g.grad * grad_scale;
  g.exp_avg.lerp_(grad, 1.0 - mu.momentum);
  const torch::Tensor update = mu.nesterov ? grad.lerp(g.exp_avg, mu.momentum) : g.exp_avg;
  g.data.mul_(1.0 - o.lr * o.weight_decay);
  int64_t offset = 0;
  for (const auto& p : g.params) {
    const int64_t n = p.numel();
    const torch::Tensor ortho = newton_schulz(update.narrow(0, offset, n).view(p.sizes()), mu);
    g.data.narrow(0, offset, n).view(p.sizes()).add_(ortho, -muon_lr(o.lr, mu, p.size(0), p.size(1)));
    offset += n;
  }
}

ParamGroup flat_group(const std::string& name, std::vector<torch::Tensor> params, const AdamWOptions& options) {
  torch::NoGradGuard no_grad;
  ParamGroup g;
  g.name = name;
  g.options = options;
  g.peak_lr = options.lr;
  int64_t total = 0;
  for (const auto& p : params) total += p.numel();
  auto opts = params.empty() ? torch::TensorOptions(torch::kFloat) : params.front().options();
  g.data = torch::empty({total}, opts);
  g.grad = torch::zeros({total}, opts);
  g.exp_avg = torch::zeros({total}, opts);
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
  return g;
}

}  // namespace

void FlatOptimizer::add_group(const std::string& name, std::vector<torch::Tensor> params, const AdamWOptions& options) {
  ParamGroup g = flat_group(name, std::move(params), options);
  g.exp_avg_sq = torch::zeros_like(g.exp_avg);
  groups_.push_back(std::move(g));
}

void FlatOptimizer::add_muon_group(const std::string& name, std::vector<torch::Tensor> params,
                                   const AdamWOptions& options, const MuonOptions& muon) {
  for (const auto& p : params)
    if (p.dim() != 2)
      throw std::invalid_argument("Muon updates matrices only; group '" + name + "' has a tensor of " +
                                  std::to_string(p.dim()) + " dimensions");
  ParamGroup g = flat_group(name, std::move(params), options);
  g.rule = UpdateRule::muon;
  g.muon = muon;
  g.exp_avg_sq = torch::zeros({0}, g.exp_avg.options());
  groups_.push_back(std::move(g));
}

void FlatOptimizer::zero_grad() {
  for (auto& g : groups_) g.grad.zero_();
}

double FlatOptimizer::grad_norm() const {
  double sq = 0;
  for (const auto& g : groups_) {
    if (g.grad.numel() == 0) continue;
    double n = g.grad.norm().item<double>();
    sq += n * n;
  }
  return std::sqrt(sq);
}

void FlatOptimizer::step(double grad_scale) {
  torch::NoGradGuard no_grad;
  for (auto& g : groups_) {
    if (g.data.numel() == 0) continue;
    ++g.step;
    if (g.rule == UpdateRule::muon) muon_step(g, grad_scale);
    else if (g.data.is_cpu() && g.data.scalar_type() == torch::kFloat) fused_adamw_cpu(g, grad_scale);
    else adamw_tensor_ops(g, grad_scale);
  }
}

void FlatOptimizer::set_lr(double lr) {
  for (auto& g : groups_) g.options.lr = lr;
}

void FlatOptimizer::set_lr_scale(double scale) {
  for (auto& g : groups_) g.options.lr = g.peak_lr * scale;
}

void split_decay_groups(const std::vector<NamedParam>& params, std::vector<torch::Tensor>& decay,
                        std::vector<torch::Tensor>& no_decay) {
  for (const auto& p : params) (p.tensor.dim() >= 2 ? decay : no_decay).push_back(p.tensor);
}

}  // namespace spread
