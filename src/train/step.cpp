#include "spread/train/step.h"

#include <chrono>
#include <cmath>

namespace spread {

void add_adamw_groups(FlatAdamW& optimizer, Transformer& model, const TrainConfig& train) {
  std::vector<NamedParam> named;
  for (auto& item : model->named_parameters()) named.push_back({item.key(), item.value()});
  std::vector<torch::Tensor> decay, no_decay;
  split_decay_groups(named, decay, no_decay);
  AdamWOptions o{train.lr, train.beta1, train.beta2, train.eps, train.weight_decay};
  optimizer.add_group("decay", decay, o);
  o.weight_decay = 0.0;
  optimizer.add_group("no_decay", no_decay, o);
}

StepResult optimizer_step(const StepInputs& in, int64_t step, double lr) {
  const TrainConfig& t = in.train;
  in.optimizer.set_lr(lr);
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
