#include "spread/losses/weighted_loss.h"

#include "spread/losses/dispersion_term.h"
#include "spread/losses/lm.h"

namespace spread {

void WeightedLoss::add(std::unique_ptr<LossTerm> term, bool log_only) { terms_.push_back({std::move(term), log_only}); }

bool WeightedLoss::needs_hidden() const {
  for (const auto& e : terms_)
    if (e.term->needs_hidden()) return true;
  return false;
}

bool WeightedLoss::needs_logits() const {
  for (const auto& e : terms_)
    if (e.term->needs_logits()) return true;
  return false;
}

LossValue WeightedLoss::compute(const LossInput& in) const {
  LossValue v;
  for (const auto& e : terms_) {
    torch::Tensor value;
    if (e.log_only) {
      torch::NoGradGuard no_grad;
      value = e.term->compute(in);
    } else {
      value = e.term->compute(in);
      auto weighted = e.term->weight() == 1.0 ? value : value * e.term->weight();
      v.total = v.total.defined() ? v.total + weighted : weighted;
    }
    v.parts.emplace_back(e.term->name(), value.item<double>());
  }
  return v;
}

WeightedLoss make_lm_loss(const Recipe& recipe) {
  WeightedLoss loss;
  loss.add(std::make_unique<LanguageModelTerm>());
  const auto& d = recipe.loss.dispersion;
  if (d.enabled) loss.add(std::make_unique<DispersionTerm>(d, recipe.model.n_layer), d.lambda == 0.0);
  return loss;
}

}  // namespace spread
