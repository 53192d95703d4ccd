#pragma once
// Moving tensors between an architecture's names and spread's, the helpers every architecture file uses.
// Reading: HfTensors finds a folder's tensor (with the old gamma/beta LayerNorm names too) or raises a UserError
// naming the file and the tensor; put* write "model.<spread name>" entries for load_model_weights.
// Writing: param and bias_or_zeros take spread's parameters by spread name.
#include <string>
#include <torch/types.h>

#include "spread/data/safetensors.h"

namespace spread::arch {

class HfTensors {
 public:
  HfTensors(NamedTensors tensors, std::string source) : tensors_(std::move(tensors)), source_(std::move(source)) {}
  const torch::Tensor* find(const std::string& name) const;
  const torch::Tensor& get(const std::string& name) const;  // UserError when missing
  bool has_prefix(const std::string& prefix) const;
  const std::string& source() const { return source_; }

 private:
  NamedTensors tensors_;
  std::string source_;
};

// `t`, the tensor `name` of `source`, when it holds floating-point values: an integer or boolean tensor where a
// weight belongs would otherwise be cast to float without a word.
const torch::Tensor& float_weight(const torch::Tensor& t, const std::string& source, const std::string& name);

// out["model." + spread_name] = t
void put(NamedTensors& out, const std::string& spread_name, const torch::Tensor& t);
// from.weight and from.bias as to.weight and to.bias
void put_linear(NamedTensors& out, const HfTensors& hf, const std::string& from, const std::string& to);
// A tied output matrix saved anyway (`name`, when the file has it) must be the embedding it is tied to.
void require_tied(const HfTensors& hf, const std::string& name, const torch::Tensor& embedding,
                  const std::string& problem, const std::string& fix);
// Row-wise parts joined into one spread tensor (a fused q|k|v or gate|up projection), each checked to have `rows`
// rows (or, rows < 0, the first part's shape) before the join, which would fail without naming the tensor.
torch::Tensor joined_rows(const HfTensors& hf, const std::vector<std::pair<std::string, int64_t>>& parts);

// spread's parameter `name`; a missing one is a bug (the model's config decides its parameters).
const torch::Tensor& param(const NamedTensors& params, const std::string& name);
// A Linear's bias, or zeros when the model was built without biases.
torch::Tensor bias_or_zeros(const NamedTensors& params, const std::string& name, int64_t width);

}  // namespace spread::arch
