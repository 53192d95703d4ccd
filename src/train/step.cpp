#include "spread/train/step.h"

#include <chrono>
#include <cmath>

namespace spread {

namespace {

// Muon's matrices: the blocks' 2-D weights (attention q|k|v and output, the MLP's), not the embeddings or the
// heads, which see one token's row at a time and keep AdamW (Keller Jordan's and nanochat's split).
bool hidden_matrix(const NamedParam& p) { return p.tensor.dim() == 2 && p.name.rfind("blocks.", 0) == 0; }

MuonOptions muon_options(const TrainConfig& t) {
  MuonOptions o;
  o.momentum = t.muon_momentum;
  o.nesterov = t.muon_nesterov;
  o.ns_steps = t.muon_ns_steps;
  o.ns_bf16 = t.muon_ns_precision == "bf16";
  o.match_rms_adamw = t.muon_adjust_lr == "match_rms_adamw";
  return o;
}

}  // namespace

void add_optimizer_groups(FlatOptimizer& optimizer, Transformer& model, const TrainConfig& train) {
  std::vector<NamedParam> named;
  std::vector<torch::Tensor> matrices;
  for (auto& item : model->named_parameters()) {
    NamedParam p{item.key(), item.value()};
    if (train.optimizer == "muon" && hidden_matrix(p)) matrices.push_back(p.tensor);
    else named.push_back(p);
  }
  std::vector<torch::Tensor> decay, no_decay;
  split_decay_groups(named, decay, no_decay);
  AdamWOptions o{train.lr, train.beta1, train.beta2, train.eps, train.weight_decay};
  if (train.optimizer == "muon")
    optimizer.add_muon_group("muon", matrices, {train.muon_lr, 0, 0, 0, train.weight_decay}, muon_options(train));
  optimizer.add_group("decay", decay, o);
  o.weight_decay = 0.0;
  optimizer.add_group("no_decay", no_decay, o);
}

StepResult optimizer_step(const StepInputs& in, int64_t step, double lr_scale) {
  const TrainConfig& t = in.train;
  in.optimizer.set_lr_scale(lr_scale);
  in.optimizer.zero_grad();
  StepResult r;
  for (int64_t micro = 0; micro < t.grad_accum; ++micro) {
    if (in.sync != nullptr && micro == t.grad_accum - 1) in.sync->arm();
    MicroStepLoss v = in.task.micro_step(in.model, step, micro, t.grad_accum);
    r.loss += v.total / double(t.grad_accum);
    if (r.parts.empty()) r.parts.assign(v.parts.size(), {"", 0.0});
    for (size_t i = 0; i < v.parts.size(); ++i) {
      r.parts[i].first = v.parts[i].first;
      r.parts[i].second += v.parts[i].second / double(t.grad_accum);
    }
  }
  if (in.group != nullptr) {
    const auto start = std::chrono::steady_clock::now();
    if (in.sync != nullptr) in.sync->finish();  // the buckets not yet summed, and the waits
    else in.group->average_gradients(in.optimizer);
    std::vector<double> values{r.loss};
    for (const auto& part : r.parts) values.push_back(part.second);
    values = in.group->mean(values);
    r.loss = values[0];
    for (size_t i = 0; i < r.parts.size(); ++i) r.parts[i].second = values[i + 1];
    r.comm_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  r.grad_norm = in.optimizer.grad_norm();
  r.finite = std::isfinite(r.loss) && std::isfinite(r.grad_norm);
  if (!r.finite) return r;
  double scale = (t.grad_clip > 0 && r.grad_norm > t.grad_clip) ? t.grad_clip / (r.grad_norm + 1e-6) : 1.0;
  in.optimizer.step(scale);
  return r;
}

}  // namespace spread
