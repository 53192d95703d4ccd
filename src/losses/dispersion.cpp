// Dispersion loss: option checks, the per-sequence subsample, the dispatch to one variant, and the building blocks
// the variants share (docs/design.md §3). The variants live in dispersion_<variant>.cpp.
#include "spread/losses/dispersion.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <stdexcept>

namespace spread {

namespace {

using VariantFn = torch::Tensor (*)(const torch::Tensor&, const torch::Tensor&, const DispersionOptions&);

VariantFn variant_function(const std::string& name) {
  if (name == "angular") return angular_dispersion;
  if (name == "cosine") return cosine_dispersion;
  if (name == "l2_repel") return l2_repel_dispersion;
  if (name == "hinge") return hinge_dispersion;
  if (name == "decorrelation") return decorrelation_dispersion;
  return nullptr;
}

std::string joined_variants() {
  std::string out;
  for (const auto& v : dispersion_variants()) out += (out.empty() ? "" : ", ") + v;
  return out;
}

void check_inputs(const torch::Tensor& hidden, const torch::Tensor& mask) {
  TORCH_CHECK(hidden.dim() == 3 && hidden.is_floating_point(), "dispersion: hidden must be a float [B, T, F] tensor");
  TORCH_CHECK(!mask.defined() || (mask.dim() == 2 && mask.size(0) == hidden.size(0) &&
                                  mask.size(1) == hidden.size(1)),
              "dispersion: mask must be [B, T] like hidden");
}

// A bool mask on the states' device, or undefined when every position is valid (so the variants take their
// unmasked path).
torch::Tensor normalised_mask(const torch::Tensor& mask, const torch::Device& device) {
  if (!mask.defined()) return mask;
  torch::Tensor m = mask.to(device, torch::kBool);
  return m.all().item<bool>() ? torch::Tensor() : m;
}

torch::Tensor gather_positions(const torch::Tensor& hidden, const torch::Tensor& index) {
  return hidden.gather(1, index.unsqueeze(-1).expand({index.size(0), index.size(1), hidden.size(2)}));
}

}  // namespace

const std::vector<std::string>& dispersion_variants() {
  static const std::vector<std::string> names{"angular", "cosine", "l2_repel", "hinge", "decorrelation"};
  return names;
}

void check_dispersion_options(const DispersionOptions& opt) {
  if (!variant_function(opt.variant))
    throw std::invalid_argument("unknown dispersion variant '" + opt.variant + "' (valid: " + joined_variants() + ")");
  if (!(opt.tau > 0) || !std::isfinite(opt.tau))
    throw std::invalid_argument("dispersion tau must be a positive number");
  if (!(opt.clamp > 0 && opt.clamp < 1))
    throw std::invalid_argument("dispersion clamp t must lie in (0, 1): arccos needs |C| <= 1 - t < 1");
  if (opt.max_tokens < 2) throw std::invalid_argument("dispersion max_tokens must be at least 2 (pairs need two)");
}

torch::Tensor dispersion_loss(const torch::Tensor& hidden, const torch::Tensor& mask, const DispersionOptions& opt,
                              uint64_t sample_seed) {
  return dispersion_loss(std::vector<torch::Tensor>{hidden}, mask, opt, sample_seed);
}

torch::Tensor dispersion_loss(const std::vector<torch::Tensor>& hidden_per_layer, const torch::Tensor& mask,
                              const DispersionOptions& opt, uint64_t sample_seed) {
  check_dispersion_options(opt);
  TORCH_CHECK(!hidden_per_layer.empty(), "dispersion: no layer given");
  for (const auto& h : hidden_per_layer) check_inputs(h, mask);
  const auto& first = hidden_per_layer.front();
  torch::Tensor m = normalised_mask(mask, first.device());
  auto s = dispersion_parts::subsample(m, first.size(0), first.size(1), opt.max_tokens, sample_seed);
  if (s.index.defined()) {
    s.index = s.index.to(first.device());
    m = s.mask.all().item<bool>() ? torch::Tensor() : s.mask.to(first.device());
  }

  VariantFn fn = variant_function(opt.variant);
  torch::Tensor total;
  for (const auto& h : hidden_per_layer) {
    torch::Tensor loss = fn(s.index.defined() ? gather_positions(h, s.index) : h, m, opt);
    total = total.defined() ? total + loss : loss;
  }
  return hidden_per_layer.size() == 1 ? total : total / static_cast<double>(hidden_per_layer.size());
}

namespace dispersion_parts {

Subsample subsample(const torch::Tensor& mask, int64_t batch, int64_t length, int64_t max_tokens, uint64_t seed) {
  if (length <= max_tokens) return {};
  torch::Tensor m = mask.defined() ? mask.to(torch::kBool) : torch::Tensor();
  if (m.defined() && m.sum(1).max().item<int64_t>() <= max_tokens) return {};

  // Random keys on the CPU (so the draw does not depend on the device); padding gets a key above every valid
  // one, so the max_tokens smallest keys are a uniform draw of valid positions, or all of them when fewer.
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  torch::Tensor keys = torch::rand({batch, length}, gen, torch::dtype(torch::kFloat64));
  if (m.defined()) keys.masked_fill_(m.cpu().logical_not(), 2.0);
  torch::Tensor drawn = std::get<1>(keys.topk(max_tokens, 1, /*largest=*/false));
  torch::Tensor index = std::get<0>(drawn.sort(1));
  torch::Device device = m.defined() ? m.device() : torch::Device(torch::kCPU);
  index = index.to(device);
  torch::Tensor sub_mask = m.defined() ? m.gather(1, index)
                                       : torch::ones({batch, max_tokens}, torch::dtype(torch::kBool).device(device));
  return {index, sub_mask};
}

Pairs pairs(const torch::Tensor& mask, int64_t batch, int64_t length, torch::ScalarType acc,
            const torch::Device& device, bool with_self) {
  auto on = torch::TensorOptions().device(device);
  torch::Tensor off_diagonal = with_self ? torch::ones({length, length}, on.dtype(torch::kBool))
                                         : torch::eye(length, on.dtype(torch::kBool)).logical_not();
  Pairs p;
  if (!mask.defined()) {
    p.mask = off_diagonal.unsqueeze(0);
    p.tokens = torch::full({batch}, static_cast<double>(length), on.dtype(acc));
    p.used = torch::full({batch}, length >= 2, on.dtype(torch::kBool));
    p.all_used = length >= 2;
  } else {
    p.mask = mask.unsqueeze(2).logical_and(mask.unsqueeze(1)).logical_and(off_diagonal);
    p.tokens = mask.sum(1).to(acc);
    p.used = p.tokens >= 2;
  }
  p.count = (p.tokens * (with_self ? p.tokens : p.tokens - 1)).clamp_min(1);
  return p;
}

torch::ScalarType accumulate_dtype(const torch::Tensor& hidden) {
  return hidden.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
}

torch::Tensor zero_padding(const torch::Tensor& hidden, const torch::Tensor& mask) {
  if (!mask.defined()) return hidden;
  return hidden.masked_fill(mask.logical_not().unsqueeze(-1), 0);
}

torch::Tensor straight_through_clamp(const torch::Tensor& c, double t) {
  return c + (c.clamp(-1 + t, 1 - t) - c).detach();
}

namespace {

struct SymmetricGram : torch::autograd::Function<SymmetricGram> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& z) {
    ctx->save_for_backward({z});
    return torch::bmm(z, z.transpose(1, 2));
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    torch::Tensor z = ctx->get_saved_variables()[0];
    const torch::Tensor& dg = grads[0];
    return {torch::bmm(dg + dg.transpose(1, 2), z)};
  }
};

}  // namespace

torch::Tensor gram(const torch::Tensor& z) { return SymmetricGram::apply(z); }

torch::Tensor cosine_gram(const torch::Tensor& z, torch::ScalarType acc) {
  // at ||z|| = 0 the norm's backward is zero (not NaN), and the + 1e-4 keeps s finite.
  torch::Tensor s = 1 / (torch::linalg_vector_norm(z, 2, {-1}, /*keepdim=*/false, acc) + kNormEps);  // [B, T]
  return gram(z).to(acc) * (s.unsqueeze(2) * s.unsqueeze(1));
}

torch::Tensor angular_distance(const torch::Tensor& hidden, double t, torch::ScalarType acc) {
  return straight_through_clamp(cosine_gram(hidden, acc), t).arccos() / M_PI;
}

torch::Tensor log_mean_exp(const torch::Tensor& logits, const Pairs& p) {
  // Skipped sequences keep all their entries so that their logsumexp (later dropped) stays finite: a row of -inf
  // would give NaN in the backward pass even with a zero incoming gradient.
  torch::Tensor drop = p.mask.logical_not();
  if (!p.all_used) drop = drop.logical_and(p.used.view({-1, 1, 1}));
  torch::Tensor masked = logits.masked_fill(drop, -std::numeric_limits<double>::infinity());
  return masked.flatten(1).logsumexp(1) - p.count.log();
}

torch::Tensor pair_mean(const torch::Tensor& values, const Pairs& p) {
  return values.masked_fill(p.mask.logical_not(), 0).flatten(1).sum(1) / p.count;
}

torch::Tensor sequence_mean(const torch::Tensor& per_sequence, const Pairs& p) {
  if (p.all_used) return per_sequence.mean();
  torch::Tensor kept = torch::where(p.used, per_sequence, torch::zeros_like(per_sequence));
  return kept.sum() / p.used.sum().clamp_min(1).to(per_sequence.scalar_type());
}

}  // namespace dispersion_parts
}  // namespace spread
