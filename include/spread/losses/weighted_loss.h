#pragma once
// A weighted sum of loss terms over one forward pass of the transformer (the LM objective's terms: next-token
// cross-entropy and dispersion). The LM task knows only this interface: it runs the model once with what the terms need, sums `weight * value`, and logs every term
// as `loss_<name>` (unweighted) next to `loss` (the weighted sum).
#include <memory>
#include <string>
#include <vector>
#include <torch/types.h>

#include "spread/config/recipe.h"
#include "spread/data/loader.h"
#include "spread/model/transformer.h"

namespace spread {

struct LossInput {
  const TransformerOutput& out;
  const Batch& batch;
  uint64_t seed;  // per (step, micro-step); for terms that subsample
};

class LossTerm {
 public:
  virtual ~LossTerm() = default;
  virtual std::string name() const = 0;
  virtual double weight() const { return 1.0; }
  virtual bool needs_hidden() const { return false; }
  virtual bool needs_logits() const { return false; }
  virtual torch::Tensor compute(const LossInput& in) const = 0;
};

struct LossValue {
  torch::Tensor total;                                   // weighted sum, the tensor to backpropagate
  std::vector<std::pair<std::string, double>> parts;     // unweighted values, for the log
};

class WeightedLoss {
 public:
  void add(std::unique_ptr<LossTerm> term, bool log_only = false);
  bool needs_hidden() const;
  bool needs_logits() const;
  // Terms added with log_only (e.g. a dispersion term with lambda = 0) are computed without a graph and never
  // touch the gradient, so such a run trains bitwise like one without the term.
  LossValue compute(const LossInput& in) const;

 private:
  struct Entry {
    std::unique_ptr<LossTerm> term;
    bool log_only;
  };
  std::vector<Entry> terms_;
};

// The LM loss a recipe asks for: next-token cross-entropy, plus dispersion when [loss.dispersion] is enabled.
WeightedLoss make_lm_loss(const Recipe& recipe);

}  // namespace spread
