#pragma once
// AdamW over flat parameter groups. Each group's parameters are views into one contiguous buffer, and so are
// their gradients, so zeroing, clipping and the update are a handful of passes over memory instead of a dozen
// operator calls per parameter tensor. On CPU float32 the update is one fused loop; elsewhere it uses tensor ops.
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
//   p *= 1 - lr * weight_decay  (decoupled, applied before the update as torch.optim.AdamW does)
// g is the gradient times `grad_scale` (the clipping factor, folded into the same pass).
#include <string>
#include <vector>
#include <torch/types.h>

namespace spread {

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.0;
};

struct ParamGroup {
  std::string name;
  AdamWOptions options;
  std::vector<torch::Tensor> params;  // views into `data`
  torch::Tensor data, grad, exp_avg, exp_avg_sq;
  int64_t step = 0;
};

class FlatAdamW {
 public:
  // Moves the values of each group's parameters into one flat buffer and makes params and grads views of it.
  void add_group(const std::string& name, std::vector<torch::Tensor> params, const AdamWOptions& options);

  void zero_grad();
  // Global L2 norm of all gradients (NaN or Inf when any gradient is not finite).
  double grad_norm() const;
  void step(double grad_scale = 1.0);
  void set_lr(double lr);

  std::vector<ParamGroup>& groups() { return groups_; }
  const std::vector<ParamGroup>& groups() const { return groups_; }

 private:
  std::vector<ParamGroup> groups_;
};

// nanoGPT's grouping: weight decay on 2-D tensors (matrices, embeddings), none on biases and norms.
struct NamedParam {
  std::string name;
  torch::Tensor tensor;
};
void split_decay_groups(const std::vector<NamedParam>& params, std::vector<torch::Tensor>& decay,
                        std::vector<torch::Tensor>& no_decay);

}  // namespace spread
