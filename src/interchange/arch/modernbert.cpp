// ModernBERT (transformers' modeling_modernbert.py): ModernBertModel, ModernBertForMaskedLM. spread's encoder with
// its options computes the same: rotary positions with a global and a local base, local attention on all but every
// global_attn_every_n_layers-th layer, a gated GELU MLP, LayerNorms without biases, an embedding norm and none before
// layer 0's attention, the MLM head. One table (modernbert_layout) for both directions: spread name -> the model's
// own name (ModernBertModel's; "model." in front for the MaskedLM). Biases and norm biases appear as the config has
// them; decoder.weight only when untied (it is the tied embedding otherwise).
#include <fmt/format.h>

#include "config_keys.h"
#include "registry.h"
#include "tensor_maps.h"

namespace spread::arch {
namespace {

std::vector<std::pair<std::string, std::string>> modernbert_layout(const TransformerConfig& cfg) {
  const std::string p = cfg.compat.mlm_transform ? "model." : "";
  std::vector<std::pair<std::string, std::string>> out;
  auto add = [&](const std::string& spread, const std::string& hf, bool bias) {
    out.push_back({spread + ".weight", hf + ".weight"});
    if (bias) out.push_back({spread + ".bias", hf + ".bias"});
  };
  out.push_back({"wte.weight", p + "embeddings.tok_embeddings.weight"});
  add("emb_norm", p + "embeddings.norm", cfg.norm.bias);
  for (int64_t i = 0; i < cfg.n_layer; ++i) {
    const std::string s = fmt::format("blocks.{}.", i), h = fmt::format("{}layers.{}.", p, i);
    if (i > 0) add(s + "ln1", h + "attn_norm", cfg.norm.bias);
    add(s + "attn.qkv", h + "attn.Wqkv", cfg.bias);
    add(s + "attn.proj", h + "attn.Wo", cfg.bias);
    add(s + "ln2", h + "mlp_norm", cfg.norm.bias);
    add(s + "mlp.fc", h + "mlp.Wi", cfg.bias);
    add(s + "mlp.proj", h + "mlp.Wo", cfg.bias);
  }
  add("ln_f", p + "final_norm", cfg.norm.bias);
  if (cfg.compat.mlm_transform) {
    add("mlm_dense", "head.dense", cfg.compat.mlm_dense_bias);
    add("mlm_norm", "head.norm", cfg.norm.bias);
    out.push_back({"mlm_bias", "decoder.bias"});
    if (!cfg.compat.tie_embeddings) out.push_back({"lm_head.weight", "decoder.weight"});
  }
  return out;
}

// The rotary base of one layer type: transformers 5's rope_parameters.<type>.rope_theta, or 4.x's <old_key>.
double rope_theta_of(const json& c, const std::string& path, const std::string& type, const std::string& old_key,
                     double fallback) {
  const json params = c.contains("rope_parameters") && c["rope_parameters"].is_object() ? c["rope_parameters"] : json();
  if (params.contains(type) && params[type].is_object()) {
    const std::string rope_type = string_key(params[type], "rope_type", path, "default");
    require(rope_type == "default", path, "rope_parameters." + type + ".rope_type", rope_type, "default");
    return positive_key(params[type], "rope_theta", path, positive_key(c, old_key, path, fallback));
  }
  return positive_key(c, old_key, path, fallback);
}

// Local attention on every layer but each global_attn_every_n_layers-th; transformers 5 also writes the pattern out
// as layer_types, which must then be that pattern.
int64_t global_every_of(const json& c, const std::string& path, int64_t n_layer) {
  const int64_t every = int_key(c, "global_attn_every_n_layers", path, 3);
  require(every > 0, path, "global_attn_every_n_layers", every, "a positive integer");
  if (!c.contains("layer_types") || c["layer_types"].is_null()) return every;
  json expected = json::array();
  for (int64_t i = 0; i < n_layer; ++i) expected.push_back(i % every == 0 ? "full_attention" : "sliding_attention");
  require(c["layer_types"] == expected, path, "layer_types", c["layer_types"],
          fmt::format("full_attention on every {}th layer from layer 0, sliding_attention elsewhere ({})", every,
                      expected.dump()));
  return every;
}

TransformerConfig read_config(const json& c, const std::string& path, const std::string& name) {
  const bool mlm_head = name == "ModernBertForMaskedLM";
  if (c.contains("rope_scaling") && !c["rope_scaling"].is_null())
    require(false, path, "rope_scaling", c["rope_scaling"], "null (rotary positions without scaling)");
  const bool attention_bias = bool_key(c, "attention_bias", path, false);
  require(bool_key(c, "mlp_bias", path, false) == attention_bias, path, "mlp_bias", !attention_bias,
          "the same as attention_bias (spread has one bias switch for both)");
  const std::string act = string_key(c, "hidden_activation", path, "gelu");
  TransformerConfig cfg = shape_of(c, path);
  cfg.mlp.gelu_tanh = tanh_gelu(act, path, "hidden_activation");
  if (mlm_head)
    require(string_key(c, "classifier_activation", path, "gelu") == act, path, "classifier_activation",
            string_key(c, "classifier_activation", path, "gelu"), "the same as hidden_activation (" + act + ")");
  cfg.norm.eps = positive_key(c, "norm_eps", path, 1e-5);
  cfg.norm.bias = bool_key(c, "norm_bias", path, false);
  cfg.bias = attention_bias;
  cfg.attention.window = int_key(c, "local_attention", path, 128);
  cfg.attention.global_every = global_every_of(c, path, cfg.n_layer);
  cfg.positions.rope_theta = rope_theta_of(c, path, "full_attention", "global_rope_theta", 160000.0);
  cfg.positions.local_rope_theta = rope_theta_of(c, path, "sliding_attention", "local_rope_theta", 10000.0);
  require((cfg.n_embd / cfg.n_head) % 2 == 0, path, "num_attention_heads", cfg.n_head,
          "a head size hidden_size / num_attention_heads that is even (rotary pairs)");
  cfg.causal = false;
  cfg.positions.rope = true;
  cfg.mlp.gated = true;
  cfg.norm.embedding = true;
  cfg.norm.first_block = false;
  cfg.compat.mlm_transform = mlm_head;
  cfg.compat.mlm_dense_bias = bool_key(c, "classifier_bias", path, false);
  cfg.compat.tie_embeddings = bool_key(c, "tie_word_embeddings", path, true);
  return cfg;
}

NamedTensors read_weights(NamedTensors tensors, const TransformerConfig& cfg, const json& config,
                          const std::string& source) {
  const HfTensors hf(std::move(tensors), source);
  const bool decoder_bias = bool_key(config, "decoder_bias", source, true);
  NamedTensors out;
  // A ModernBertModel saved from a ModernBertFor* keeps that model's "model." prefix.
  const std::string prefix = !cfg.compat.mlm_transform && hf.has_prefix("model.") ? "model." : "";
  for (const auto& [spread_name, hf_name] : modernbert_layout(cfg)) {
    if (hf_name == "decoder.bias" && !decoder_bias) {  // no bias: zeros do the same
      put(out, spread_name, torch::zeros({cfg.vocab_size}));
      continue;
    }
    put(out, spread_name, hf.get(prefix + hf_name));
  }
  if (cfg.compat.mlm_transform && cfg.compat.tie_embeddings)
    require_tied(hf, "decoder.weight", out["model.wte.weight"],
                 "differs from the token embeddings but the config ties them",
                 "set tie_word_embeddings = false in config.json if the model has an output matrix of its own");
  return out;
}

json write_config(const TransformerConfig& cfg, const ConfigTokenIds& ids) {
  const char* act = cfg.mlp.gelu_tanh ? "gelu_pytorch_tanh" : "gelu";
  // Without a window every layer is global: one global layer in every 1.
  const int64_t every = cfg.attention.window > 0 ? cfg.attention.global_every : 1;
  return {{"architectures", {cfg.compat.mlm_transform ? "ModernBertForMaskedLM" : "ModernBertModel"}},
          {"model_type", "modernbert"},
          {"vocab_size", cfg.vocab_size},
          {"hidden_size", cfg.n_embd},
          {"intermediate_size", cfg.mlp_width()},
          {"num_hidden_layers", cfg.n_layer},
          {"num_attention_heads", cfg.n_head},
          {"max_position_embeddings", cfg.block_size},
          {"hidden_activation", act},
          {"classifier_activation", act},
          {"norm_eps", cfg.norm.eps},
          {"norm_bias", cfg.norm.bias},
          {"attention_bias", cfg.bias},
          {"mlp_bias", cfg.bias},
          {"classifier_bias", cfg.compat.mlm_dense_bias},
          {"decoder_bias", true},
          {"local_attention", cfg.attention.window > 0 ? cfg.attention.window : 128},
          {"global_attn_every_n_layers", every},
          {"global_rope_theta", cfg.positions.rope_theta},
          {"local_rope_theta",
           cfg.positions.local_rope_theta > 0 ? cfg.positions.local_rope_theta : cfg.positions.rope_theta},
          {"embedding_dropout", cfg.dropout},
          {"attention_dropout", cfg.dropout},
          {"mlp_dropout", cfg.dropout},
          {"initializer_range", 0.02},
          {"tie_word_embeddings", cfg.compat.tie_embeddings},
          {"pad_token_id", id_or_null(ids.pad)},
          {"cls_token_id", id_or_null(ids.cls)},
          {"sep_token_id", id_or_null(ids.sep)},
          {"bos_token_id", id_or_null(ids.cls)},
          {"eos_token_id", id_or_null(ids.sep)},
          {"torch_dtype", "float32"}};
}

NamedTensors write_weights(const NamedTensors& params, const TransformerConfig& cfg) {
  NamedTensors out;
  for (const auto& [spread_name, hf_name] : modernbert_layout(cfg)) out[hf_name] = param(params, spread_name);
  return out;
}

}  // namespace

bool is_modernbert_shaped(const TransformerConfig& cfg) {
  return !cfg.causal && !cfg.norm.post && cfg.positions.rope && !cfg.norm.rms && cfg.mlp.gated && !cfg.mlp.silu &&
         cfg.norm.embedding && !cfg.norm.first_block && cfg.compat.type_vocab_size == 0 && cfg.kv_heads() == cfg.n_head;
}

Architecture modernbert_architecture() {
  return {"modernbert", "modernbert", {"ModernBertModel", "ModernBertForMaskedLM"}, {"modernbert"}, /*encoder=*/true,
          read_config, read_weights, is_modernbert_shaped, write_config, write_weights};
}

}  // namespace spread::arch
