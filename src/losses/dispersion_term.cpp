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

std::vector<torch::Tensor> DispersionTerm::states(const TransformerOutput& out) const {
  const int64_t last = int64_t(out.hidden.size()) - 1;
  std::vector<torch::Tensor> chosen;
  for (int64_t layer : layers_) {
    // The final LayerNorm only follows the last block; after_norm takes its output there.
    const bool use_norm = config_.after_norm && layer == last;
    chosen.push_back(use_norm ? out.final_hidden : out.hidden[size_t(layer)]);
  }
  return chosen;
}

torch::Tensor DispersionTerm::compute(const LossInput& in) const {
  DispersionOptions opt;
  opt.variant = config_.variant;
  opt.tau = config_.tau;
  opt.clamp = config_.clamp;
  opt.max_tokens = config_.max_tokens;
  // One subsample for every chosen layer (docs/design.md §3.2 step 1).
  return dispersion_loss(states(in.out), torch::Tensor(), opt, in.seed);
}

}  // namespace spread
