#pragma once
// The dispersion penalty as a term of the LM objective: lambda * mean over the chosen layers of
// dispersion_loss(hidden states of that layer) (losses/dispersion.h has the formulas).
// Layers (docs/design.md §3.4, as the reference's dispersion_loc): "last" = the last block's output after the final
// LayerNorm (what the LM head sees; before it when after_norm = false); "all" = every block output, the last one taken
// as "last" is, without the embedding output (the reference's disperse_hidden_states skips the embedding layer; an
// earlier version included it); or a list of layer indices (0 = embedding output, i = block i).
#include "spread/config/recipe.h"
#include "spread/losses/weighted_loss.h"

namespace spread {

class DispersionTerm : public LossTerm {
 public:
  DispersionTerm(const DispersionConfig& config, int64_t n_layer);
  std::string name() const override { return "disp"; }
  double weight() const override { return config_.lambda; }
  bool needs_hidden() const override { return true; }
  torch::Tensor compute(const LossInput& in) const override;

  // The states the penalty is computed on, one per chosen layer, in order.
  std::vector<torch::Tensor> states(const TransformerOutput& out) const;

 private:
  DispersionConfig config_;
  std::vector<int64_t> layers_;  // indices into TransformerOutput::hidden (0 = embedding output)
};

}  // namespace spread
