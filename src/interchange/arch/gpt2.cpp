// GPT-2 (transformers' modeling_gpt2.py): GPT2LMHeadModel, GPT2Model. spread's causal blocks are GPT-2's (pre-norm,
// fused QKV in q|k|v order, learned positions, tied output embedding). GPT-2's Conv1D keeps its weight as [in, out],
// the transpose of nn.Linear's [out, in]. GPT-2 has no switch for biases: a model trained with bias = false is
// written with zero biases, and read back only when they are zero. GPT-2's default activation "gelu_new" is the tanh
// approximation; spread's exact GELU is written as "gelu".
#include <fmt/format.h>

#include "config_keys.h"
#include "registry.h"
#include "spread/util/error.h"
#include "tensor_maps.h"

namespace spread::arch {
namespace {

// One block parameter: its spread suffix, GPT-2's, whether Conv1D transposes it, and for biases the width of the
// layer in units of n_embd (so that a missing bias can be written as zeros; the MLP's is the MLP's width).
struct Gpt2Name {
  const char* spread;
  const char* hf;
  bool transposed;
  int64_t bias_width_per_embd;  // 0 for weights and LayerNorm biases
};

const std::vector<Gpt2Name>& block_names() {
  static const std::vector<Gpt2Name> names = {
      {"ln1.weight", "ln_1.weight", false, 0},           {"ln1.bias", "ln_1.bias", false, 0},
      {"attn.qkv.weight", "attn.c_attn.weight", true, 0}, {"attn.qkv.bias", "attn.c_attn.bias", false, 3},
      {"attn.proj.weight", "attn.c_proj.weight", true, 0}, {"attn.proj.bias", "attn.c_proj.bias", false, 1},
      {"ln2.weight", "ln_2.weight", false, 0},           {"ln2.bias", "ln_2.bias", false, 0},
      {"mlp.fc.weight", "mlp.c_fc.weight", true, 0},     {"mlp.fc.bias", "mlp.c_fc.bias", false, 4},
      {"mlp.proj.weight", "mlp.c_proj.weight", true, 0}, {"mlp.proj.bias", "mlp.c_proj.bias", false, 1}};
  return names;
}

const std::vector<std::pair<std::string, std::string>>& top_names() {
  static const std::vector<std::pair<std::string, std::string>> names = {
      {"wte.weight", "transformer.wte.weight"},
      {"wpe.weight", "transformer.wpe.weight"},
      {"ln_f.weight", "transformer.ln_f.weight"},
      {"ln_f.bias", "transformer.ln_f.bias"}};
  return names;
}

// The tensor, with or without GPT2LMHeadModel's "transformer." prefix (GPT2Model has none).
const torch::Tensor* find_gpt2(const NamedTensors& hf, const std::string& name) {
  auto it = hf.find(name);
  if (it == hf.end() && name.rfind("transformer.", 0) == 0) it = hf.find(name.substr(12));
  return it == hf.end() ? nullptr : &it->second;
}

const torch::Tensor& require_gpt2(const NamedTensors& hf, const std::string& name, const std::string& source) {
  const torch::Tensor* t = find_gpt2(hf, name);
  if (!t)
    throw user_error(source, 0, name, "missing from model.safetensors",
                     "give a GPT-2 export of spread or a GPT2LMHeadModel / GPT2Model folder");
  return *t;
}

TransformerConfig read_config(const json& c, const std::string& path, const std::string&) {
  require(!bool_key(c, "add_cross_attention", path, false), path, "add_cross_attention", true, "false");
  require(bool_key(c, "scale_attn_weights", path, true), path, "scale_attn_weights", false, "true");
  require(!bool_key(c, "scale_attn_by_inverse_layer_idx", path, false), path, "scale_attn_by_inverse_layer_idx", true,
          "false");
  TransformerConfig cfg;
  cfg.vocab_size = size_key(c, "vocab_size", path);
  cfg.n_layer = size_key(c, "n_layer", path);
  cfg.n_head = size_key(c, "n_head", path);
  cfg.n_embd = size_key(c, "n_embd", path);
  cfg.block_size = size_key(c, "n_positions", path, size_key(c, "n_ctx", path, 1024));
  cfg.mlp.width = int_key(c, "n_inner", path, 0);
  cfg.norm.eps = positive_key(c, "layer_norm_epsilon", path, 1e-5);
  cfg.mlp.gelu_tanh = tanh_gelu(string_key(c, "activation_function", path, "gelu_new"), path, "activation_function");
  require(cfg.n_head > 0 && cfg.n_embd % cfg.n_head == 0, path, "n_head", cfg.n_head, "a divisor of n_embd");
  cfg.causal = true;
  cfg.bias = true;
  return cfg;
}

// Also takes the first block_size rows of a longer wpe, and refuses an lm_head.weight that is not the tied
// wte.weight and non-zero biases for a model without them.
NamedTensors read_weights(NamedTensors hf, const TransformerConfig& cfg, const json&, const std::string& source) {
  NamedTensors out;
  for (const auto& [to, from] : top_names()) out["model." + to] = require_gpt2(hf, from, source);
  auto& wpe = out["model.wpe.weight"];
  if (wpe.dim() == 2 && wpe.size(0) > cfg.block_size) wpe = wpe.narrow(0, 0, cfg.block_size);  // a longer context
  if (const torch::Tensor* head = find_gpt2(hf, "lm_head.weight"))
    if (!head->sizes().equals(out["model.wte.weight"].sizes()) || !torch::equal(*head, out["model.wte.weight"]))
      throw user_error(source, 0, "lm_head.weight", "differs from transformer.wte.weight",
                       "spread ties its output embedding to the input one: only tied GPT-2 models load");
  for (int64_t i = 0; i < cfg.n_layer; ++i) {
    const std::string s = fmt::format("model.blocks.{}.", i), h = fmt::format("transformer.h.{}.", i);
    for (const auto& n : block_names()) {
      const auto& t = require_gpt2(hf, h + n.hf, source);
      const bool model_has_it = cfg.bias || n.bias_width_per_embd == 0;
      if (!model_has_it) {
        if (t.count_nonzero().item<int64_t>() != 0)
          throw user_error(source, 0, h + n.hf, "is not zero but the model has no biases ([model] bias = false)",
                           "set bias = true in [model] to load this model");
        continue;
      }
      out[s + n.spread] = n.transposed && t.dim() == 2 ? t.t().contiguous() : t;
    }
  }
  return out;
}

bool holds(const TransformerConfig& cfg) { return cfg.causal && !is_llama_shaped(cfg); }

json write_config(const TransformerConfig& cfg, const ConfigTokenIds& ids) {
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"vocab_size", cfg.vocab_size},
          {"n_positions", cfg.block_size},
          {"n_ctx", cfg.block_size},  // read by old transformers versions
          {"n_embd", cfg.n_embd},
          {"n_layer", cfg.n_layer},
          {"n_head", cfg.n_head},
          {"n_inner", cfg.mlp_width()},
          {"activation_function", cfg.mlp.gelu_tanh ? "gelu_new" : "gelu"},
          {"layer_norm_epsilon", cfg.norm.eps},
          {"resid_pdrop", cfg.dropout},
          {"embd_pdrop", cfg.dropout},
          {"attn_pdrop", cfg.dropout},
          {"initializer_range", 0.02},
          {"scale_attn_weights", true},
          {"scale_attn_by_inverse_layer_idx", false},
          {"reorder_and_upcast_attn", false},
          {"tie_word_embeddings", true},
          {"use_cache", true},
          {"bos_token_id", id_or_null(ids.bos)},
          {"eos_token_id", id_or_null(ids.eos)},
          {"torch_dtype", "float32"}};
}

// GPT2LMHeadModel's state dict, without lm_head.weight (it is tied).
NamedTensors write_weights(const NamedTensors& params, const TransformerConfig& cfg) {
  NamedTensors out;
  for (const auto& [from, to] : top_names()) out[to] = param(params, from);
  for (int64_t i = 0; i < cfg.n_layer; ++i) {
    const std::string s = fmt::format("blocks.{}.", i), h = fmt::format("transformer.h.{}.", i);
    for (const auto& n : block_names()) {
      if (n.bias_width_per_embd > 0) {
        const int64_t width =
            n.spread == std::string("mlp.fc.bias") ? cfg.mlp_width() : n.bias_width_per_embd * cfg.n_embd;
        out[h + n.hf] = bias_or_zeros(params, s + n.spread, width);
        continue;
      }
      const auto& t = param(params, s + n.spread);
      out[h + n.hf] = n.transposed ? t.t().contiguous() : t;
    }
  }
  return out;
}

}  // namespace

Architecture gpt2_architecture() {
  return {"gpt2", "gpt2", {"GPT2LMHeadModel", "GPT2Model"}, {"gpt2"}, /*encoder=*/false,
          read_config, read_weights, holds, write_config, write_weights};
}

}  // namespace spread::arch
