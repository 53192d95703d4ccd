#pragma once
// The dispersion penalty as a term of the LM objective: lambda * mean over the chosen layers of
// dispersion_loss(hidden states of that layer) (losses/dispersion.h has the formulas).
// Layers: "last" = the final block output (before the final LayerNorm unless after_norm), "all" = every block,
// or a list of block indices (1 = first block).
#include "spread/config/recipe.h"
#include "spread/losses/objective.h"

namespace spread {

class DispersionTerm : public LossTerm {
 public:
  DispersionTerm(const DispersionConfig& config, int64_t n_layer);
  std::string name() const override { return "disp"; }
  double weight() const override { return config_.lambda; }
  bool needs_hidden() const override { return true; }
  torch::Tensor compute(const LossInput& in) const override;

 private:
  DispersionConfig config_;
  std::vector<int64_t> layers_;  // block indices into TransformerOutput::hidden
};

}  // namespace spread
