#include "tensor_maps.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "spread/util/error.h"

namespace spread::arch {
namespace {

// BERT checkpoints of TensorFlow descent name LayerNorm's parameters gamma and beta.
std::string gamma_beta(const std::string& name) {
  for (const auto& [now, old] : {std::pair<std::string, std::string>{"LayerNorm.weight", "LayerNorm.gamma"},
                                 {"LayerNorm.bias", "LayerNorm.beta"}})
    if (name.size() >= now.size() && name.compare(name.size() - now.size(), now.size(), now) == 0)
      return name.substr(0, name.size() - now.size()) + old;
  return name;
}

}  // namespace

const torch::Tensor& float_weight(const torch::Tensor& t, const std::string& source, const std::string& name) {
  if (!t.is_floating_point())
    throw user_error(source, 0, name,
                     fmt::format("is a tensor of {}, not of floating-point weights", c10::toString(t.scalar_type())),
                     "the file is damaged or not this model's: a weight is F32, F16 or BF16");
  return t;
}

const torch::Tensor* HfTensors::find(const std::string& name) const {
  for (const std::string& candidate : {name, gamma_beta(name)}) {
    auto it = tensors_.find(candidate);
    if (it == tensors_.end()) continue;
    return &float_weight(it->second, source_, candidate);
  }
  return nullptr;
}

const torch::Tensor& HfTensors::get(const std::string& name) const {
  if (const auto* t = find(name)) return *t;
  throw user_error(source_, 0, "", "has no tensor '" + name + "'", "was the folder saved by transformers?");
}

bool HfTensors::has_prefix(const std::string& prefix) const {
  auto it = tensors_.lower_bound(prefix);
  return it != tensors_.end() && it->first.rfind(prefix, 0) == 0;
}

void put(NamedTensors& out, const std::string& spread_name, const torch::Tensor& t) { out["model." + spread_name] = t; }

void put_linear(NamedTensors& out, const HfTensors& hf, const std::string& from, const std::string& to) {
  put(out, to + ".weight", hf.get(from + ".weight"));
  put(out, to + ".bias", hf.get(from + ".bias"));
}

void require_tied(const HfTensors& hf, const std::string& name, const torch::Tensor& embedding,
                  const std::string& problem, const std::string& fix) {
  const torch::Tensor* decoder = hf.find(name);
  if (decoder && (!decoder->sizes().equals(embedding.sizes()) || !torch::equal(*decoder, embedding)))
    throw user_error(hf.source(), 0, name, problem, fix);
}

torch::Tensor joined_rows(const HfTensors& hf, const std::vector<std::pair<std::string, int64_t>>& parts) {
  std::vector<torch::Tensor> tensors;
  for (const auto& [name, rows] : parts) {
    const torch::Tensor& t = hf.get(name);
    if (rows >= 0 && (t.dim() < 1 || t.size(0) != rows))
      throw user_error(hf.source(), 0, name, fmt::format("has shape {} but config.json implies {} rows",
                                                         fmt::join(t.sizes().vec(), "x"), rows),
                       "was the folder saved by transformers with this config.json?");
    if (rows < 0 && !tensors.empty() && !t.sizes().equals(tensors[0].sizes()))
      throw user_error(hf.source(), 0, name, fmt::format("has shape {} but {} has {}", fmt::join(t.sizes().vec(), "x"),
                                                         parts[0].first, fmt::join(tensors[0].sizes().vec(), "x")),
                       "was the folder saved by transformers with this config.json?");
    tensors.push_back(t);
  }
  return tensors.size() == 1 ? tensors[0] : torch::cat(tensors, 0);
}

const torch::Tensor& param(const NamedTensors& params, const std::string& name) {
  auto it = params.find(name);
  TORCH_CHECK(it != params.end(), "spread model has no parameter ", name);
  return it->second;
}

torch::Tensor bias_or_zeros(const NamedTensors& params, const std::string& name, int64_t width) {
  auto it = params.find(name);
  return it != params.end() ? it->second : torch::zeros({width});
}

}  // namespace spread::arch
