#include "spread/losses/dispersion_term.h"

#include "spread/losses/dispersion.h"

namespace spread {

DispersionTerm::DispersionTerm(const DispersionConfig& config, int64_t n_layer) : config_(config) {
  if (config.layers_mode == "all") {
    for (int64_t i = 1; i <= n_layer; ++i) layers_.push_back(i);
  } else if (config.layers_mode == "list") {
    layers_ = config.layers;
  } else {
    layers_ = {n_layer};
  }
}

torch::Tensor DispersionTerm::compute(const LossInput& in) const {
  DispersionOptions opt;
  opt.variant = config_.variant;
  opt.tau = config_.tau;
  opt.clamp = config_.clamp;
  opt.max_tokens = config_.max_tokens;
  const int64_t last = int64_t(in.out.hidden.size()) - 1;
  torch::Tensor sum;
  for (size_t i = 0; i < layers_.size(); ++i) {
    // The final LayerNorm only follows the last block; after_norm takes its output there.
    const bool use_norm = config_.after_norm && layers_[i] == last;
    const torch::Tensor& h = use_norm ? in.out.final_hidden : in.out.hidden[size_t(layers_[i])];
    auto value = dispersion_loss(h, torch::Tensor(), opt, in.seed + i);
    sum = sum.defined() ? sum + value : value;
  }
  return layers_.size() == 1 ? sum : sum / double(layers_.size());
}

}  // namespace spread
