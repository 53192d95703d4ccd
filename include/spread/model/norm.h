#pragma once
// The normalisation layers of the supported architectures, as one module:
//   LayerNorm: (x - mean) / sqrt(var + eps) * weight (+ bias): GPT-2 and BERT with a bias, ModernBERT without.
//   RMSNorm:   x / sqrt(mean(x^2) + eps) * weight, computed in float32 and cast back before the weight multiplies,
//              as transformers' LlamaRMSNorm does (Llama, SmolLM, Qwen2).
// Parameters are named weight and bias, as torch::nn::LayerNorm names them, so checkpoints keep their keys.
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

namespace spread {

struct NormOptions {
  int64_t dim = 0;
  double eps = 1e-5;
  bool rms = false;   // RMSNorm instead of LayerNorm
  bool bias = true;   // LayerNorm only: RMSNorm has none
};

// x / sqrt(mean(x^2) + eps) * weight over the last dimension, at least in float32, cast back before the weight.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

class NormImpl : public torch::nn::Module {
 public:
  explicit NormImpl(const NormOptions& options);
  torch::Tensor forward(const torch::Tensor& x) const;
  const NormOptions& options() const { return options_; }

  torch::Tensor weight, bias;  // bias undefined when the norm has none

 private:
  NormOptions options_;
};
TORCH_MODULE(Norm);

}  // namespace spread
