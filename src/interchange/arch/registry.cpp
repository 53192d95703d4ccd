#include "registry.h"

#include <algorithm>
#include <stdexcept>

namespace spread {

const std::vector<Architecture>& architectures() {
  static const std::vector<Architecture> table = {
      arch::bert_architecture(), arch::megatron_bert_architecture(), arch::distilbert_architecture(),
      arch::roberta_architecture(), arch::gpt2_architecture(),     arch::llama_architecture(),
      arch::modernbert_architecture()};
  return table;
}

const Architecture* architecture_named(const std::string& name) {
  const auto in = [&name](const std::vector<std::string>& list) {
    return std::find(list.begin(), list.end(), name) != list.end();
  };
  for (const auto& a : architectures())
    if (in(a.names) || in(a.model_types)) return &a;
  return nullptr;
}

const Architecture& architecture(const std::string& layout) {
  for (const auto& a : architectures())
    if (a.layout == layout) return a;
  throw std::out_of_range("no architecture with layout " + layout);
}

const Architecture* architecture_holding(const TransformerConfig& cfg) {
  for (const auto& a : architectures())
    if (a.holds && a.holds(cfg)) return &a;
  return nullptr;
}

std::string supported_architectures() {
  std::string out;
  for (const auto& a : architectures())
    for (const auto& name : a.names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

NamedTensors spread_parameters(const Transformer& model) {
  NamedTensors out;
  for (const auto& item : model->named_parameters()) out[item.key()] = item.value().detach().to(torch::kCPU);
  return out;
}

}  // namespace spread
