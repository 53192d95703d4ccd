#pragma once
// Next-token cross-entropy, the language model's own loss: L_LM = mean_t -log p(y_t | x_<=t).
#include "spread/losses/weighted_loss.h"

namespace spread {

class LanguageModelTerm : public LossTerm {
 public:
  std::string name() const override { return "lm"; }
  bool needs_logits() const override { return true; }
  torch::Tensor compute(const LossInput& in) const override {
    return TransformerImpl::lm_loss(in.out.logits, in.batch.y);
  }
};

}  // namespace spread
