// Llama (transformers' modeling_llama.py): LlamaForCausalLM, as SmolLM, TinyLlama and other Llama-style decoders.
// spread's decoder with rope, rmsnorm, swiglu and no biases computes the same: each spread tensor is the row-wise
// concatenation of Llama tensors (q_proj, k_proj, v_proj in attn.qkv; gate_proj, up_proj in mlp.fc), one table
// (llama_layout) for both directions. Rotary positions without scaling only; a tied or untied output matrix.
#include <fmt/format.h>

#include "config_keys.h"
#include "registry.h"
#include "tensor_maps.h"

namespace spread::arch {
namespace {

struct LlamaTensor {
  std::string spread;                                  // "blocks.0.attn.qkv.weight"
  std::vector<std::pair<std::string, int64_t>> parts;  // {"model.layers.0.self_attn.q_proj.weight", rows}, ...
};

std::vector<LlamaTensor> llama_layout(const TransformerConfig& cfg) {
  const int64_t D = cfg.n_embd / cfg.n_head, q_rows = cfg.n_head * D, kv_rows = cfg.kv_heads() * D;
  const int64_t C = cfg.n_embd, I = cfg.mlp_width();
  std::vector<LlamaTensor> out = {{"wte.weight", {{"model.embed_tokens.weight", cfg.vocab_size}}}};
  for (int64_t i = 0; i < cfg.n_layer; ++i) {
    const std::string s = fmt::format("blocks.{}.", i), h = fmt::format("model.layers.{}.", i);
    out.push_back({s + "ln1.weight", {{h + "input_layernorm.weight", C}}});
    out.push_back({s + "attn.qkv.weight", {{h + "self_attn.q_proj.weight", q_rows},
                                           {h + "self_attn.k_proj.weight", kv_rows},
                                           {h + "self_attn.v_proj.weight", kv_rows}}});
    out.push_back({s + "attn.proj.weight", {{h + "self_attn.o_proj.weight", C}}});
    out.push_back({s + "ln2.weight", {{h + "post_attention_layernorm.weight", C}}});
    out.push_back({s + "mlp.fc.weight", {{h + "mlp.gate_proj.weight", I}, {h + "mlp.up_proj.weight", I}}});
    out.push_back({s + "mlp.proj.weight", {{h + "mlp.down_proj.weight", C}}});
  }
  out.push_back({"ln_f.weight", {{"model.norm.weight", C}}});
  if (!cfg.compat.tie_embeddings) out.push_back({"lm_head.weight", {{"lm_head.weight", cfg.vocab_size}}});
  return out;
}

TransformerConfig read_config(const json& c, const std::string& path, const std::string&) {
  if (c.contains("rope_scaling") && !c["rope_scaling"].is_null())
    require(false, path, "rope_scaling", c["rope_scaling"], "null (rotary positions without scaling)");
  const json params = c.contains("rope_parameters") ? c["rope_parameters"] : json();
  if (params.is_object()) {  // transformers 5 keeps the base and the scaling type here
    const std::string type = string_key(params, "rope_type", path, "default");
    require(type == "default", path, "rope_parameters.rope_type", type, "default");
  }
  const std::string act = string_key(c, "hidden_act", path, "silu");
  require(act == "silu", path, "hidden_act", act, "silu");
  require(!bool_key(c, "attention_bias", path, false), path, "attention_bias", true, "false");
  require(!bool_key(c, "mlp_bias", path, false), path, "mlp_bias", true, "false");
  TransformerConfig cfg = shape_of(c, path);
  cfg.attention.n_kv_head = int_key(c, "num_key_value_heads", path, cfg.n_head);
  cfg.norm.eps = positive_key(c, "rms_norm_eps", path, 1e-6);
  cfg.positions.rope_theta = positive_key(params.is_object() ? params : c, "rope_theta", path, 10000.0);
  cfg.compat.tie_embeddings = bool_key(c, "tie_word_embeddings", path, false);
  require(cfg.attention.n_kv_head > 0 && cfg.n_head % cfg.attention.n_kv_head == 0, path, "num_key_value_heads",
          cfg.attention.n_kv_head, "a divisor of num_attention_heads");
  const int64_t head_size = int_key(c, "head_dim", path, cfg.n_embd / cfg.n_head);
  require(head_size == cfg.n_embd / cfg.n_head, path, "head_dim", head_size, "hidden_size / num_attention_heads");
  cfg.causal = true;
  cfg.bias = false;
  cfg.norm.bias = false;
  cfg.norm.rms = true;
  cfg.positions.rope = true;
  cfg.mlp.gated = true;
  cfg.mlp.silu = true;
  return cfg;
}

NamedTensors read_weights(NamedTensors tensors, const TransformerConfig& cfg, const json&, const std::string& source) {
  const HfTensors hf(std::move(tensors), source);
  NamedTensors out;
  for (const auto& t : llama_layout(cfg)) put(out, t.spread, joined_rows(hf, t.parts));
  return out;
}

json write_config(const TransformerConfig& cfg, const ConfigTokenIds& ids) {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"vocab_size", cfg.vocab_size},
          {"hidden_size", cfg.n_embd},
          {"intermediate_size", cfg.mlp_width()},
          {"num_hidden_layers", cfg.n_layer},
          {"num_attention_heads", cfg.n_head},
          {"num_key_value_heads", cfg.kv_heads()},
          {"head_dim", cfg.n_embd / cfg.n_head},
          {"hidden_act", "silu"},
          {"max_position_embeddings", cfg.block_size},
          {"rms_norm_eps", cfg.norm.eps},
          {"rope_theta", cfg.positions.rope_theta},
          {"rope_scaling", nullptr},
          {"attention_bias", false},
          {"mlp_bias", false},
          {"attention_dropout", cfg.dropout},
          {"initializer_range", 0.02},
          {"tie_word_embeddings", cfg.compat.tie_embeddings},
          {"use_cache", true},
          {"bos_token_id", id_or_null(ids.bos)},
          {"eos_token_id", id_or_null(ids.eos)},
          {"torch_dtype", "float32"}};
}

NamedTensors write_weights(const NamedTensors& params, const TransformerConfig& cfg) {
  NamedTensors out;
  for (const auto& t : llama_layout(cfg)) {
    int64_t row = 0;
    for (const auto& [name, rows] : t.parts) {
      out[name] = param(params, t.spread).narrow(0, row, rows).contiguous();
      row += rows;
    }
  }
  return out;
}

}  // namespace

bool is_llama_shaped(const TransformerConfig& cfg) {
  return cfg.causal && !cfg.norm.post && cfg.positions.rope && cfg.norm.rms && cfg.mlp.gated && cfg.mlp.silu &&
         !cfg.bias && cfg.compat.type_vocab_size == 0 && !cfg.compat.mlm_transform && cfg.head_dim == 0;
}

Architecture llama_architecture() {
  return {"llama", "llama", {"LlamaForCausalLM"}, {"llama"}, /*encoder=*/false,
          read_config, read_weights, is_llama_shaped, write_config, write_weights};
}

}  // namespace spread::arch
