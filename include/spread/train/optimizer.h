#pragma once
// The optimizer over flat parameter groups. Each group's parameters are views into one contiguous buffer, and so
// are their gradients, so zeroing, clipping, the all-reduce and the update are a handful of passes over memory
// instead of a dozen operator calls per parameter tensor. A group is updated by AdamW or by Muon.
//
// AdamW (torch.optim.AdamW). On CPU float32 the update is one fused loop; elsewhere it uses tensor ops.
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
//   p *= 1 - lr * weight_decay  (decoupled, applied before the update as torch.optim.AdamW does)
//
// Muon (torch.optim.Muon, after Keller Jordan's; for 2-D matrices only), per matrix of the group:
//   B = lerp(B, g, 1 - mu);  U = nesterov ? lerp(g, B, mu) : B
//   O = NS(U): X = U / max(|U|_F, eps) (transposed when it has more rows than columns), then ns_steps times
//       A = X X^T;  X = a X + (b A + c A A) X   with the quintic coefficients (a, b, c) = (3.4445, -4.7750, 2.0315)
//   p *= 1 - lr * weight_decay;  p -= lr * s(rows, cols) * O,  s = sqrt(max(1, rows / cols)) ("original") or
//       0.2 sqrt(max(rows, cols)) ("match_rms_adamw")
// The Newton-Schulz products are rounded to bfloat16 as torch's are (on the CPU through the bf16 GEMM of
// runtime/direct_mm.h, float32 accumulation), or stay float32 (the BLAS's GEMM) when ns_bf16 is off.
//
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

struct MuonOptions {
  double momentum = 0.95;
  bool nesterov = true;
  int64_t ns_steps = 5;
  bool ns_bf16 = true;
  bool match_rms_adamw = false;
  double eps = 1e-7;  // the floor of the Frobenius norm that NS divides by
};

enum class UpdateRule { adamw, muon };

struct ParamGroup {
  std::string name;
  UpdateRule rule = UpdateRule::adamw;
  AdamWOptions options;  // lr and weight_decay apply to both rules; the betas and eps to AdamW
  MuonOptions muon;
  double peak_lr = 0;    // options.lr at schedule scale 1
  std::vector<torch::Tensor> params;  // views into `data`
  // exp_avg: AdamW's first moment, or Muon's momentum buffer. exp_avg_sq: AdamW's second moment; empty for Muon.
  torch::Tensor data, grad, exp_avg, exp_avg_sq;
  int64_t step = 0;
};

class FlatOptimizer {
 public:
  // Moves the values of each group's parameters into one flat buffer and makes params and grads views of it.
  void add_group(const std::string& name, std::vector<torch::Tensor> params, const AdamWOptions& options);
  // The same, for a Muon group: every parameter must be a matrix. options.lr is the group's peak rate.
  void add_muon_group(const std::string& name, std::vector<torch::Tensor> params, const AdamWOptions& options,
                      const MuonOptions& muon);

  void zero_grad();
  // Global L2 norm of all gradients (NaN or Inf when any gradient is not finite).
  double grad_norm() const;
  void step(double grad_scale = 1.0);
  // Every group's rate to lr, or to its peak rate times a schedule's factor.
  void set_lr(double lr);
  void set_lr_scale(double scale);

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
