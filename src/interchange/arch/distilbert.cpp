// DistilBERT (transformers' modeling_distilbert.py, configuration_distilbert.py): DistilBertModel,
// DistilBertForMaskedLM. BERT's post-LayerNorm blocks without token types, under names of its own (q_lin, k_lin,
// v_lin, out_lin, sa_layer_norm, ffn.lin1/lin2, output_layer_norm) and config keys of its own (dim, n_layers,
// n_heads, hidden_dim, activation). Its LayerNorms are built with eps 1e-12, which is no config key: only a model
// with that epsilon is written in this layout. Learned positions only (sinusoidal_pos_embds false, as every
// published DistilBERT checkpoint has it). sentence-transformers' msmarco-distilbert and multi-qa-distilbert models
// wrap a DistilBertModel.
#include <fmt/format.h>

#include "bert_parts.h"
#include "config_keys.h"
#include "registry.h"
#include "tensor_maps.h"

namespace spread::arch {
namespace {

constexpr double kDistilBertEps = 1e-12;  // nn.LayerNorm(config.dim, eps=1e-12) throughout modeling_distilbert.py

TransformerConfig read_config(const json& c, const std::string& path, const std::string& name) {
  require(!bool_key(c, "sinusoidal_pos_embds", path, false), path, "sinusoidal_pos_embds", true,
          "false (learned positions)");
  TransformerConfig cfg;
  cfg.vocab_size = size_key(c, "vocab_size", path);
  cfg.n_layer = size_key(c, "n_layers", path);
  cfg.n_head = size_key(c, "n_heads", path);
  cfg.n_embd = size_key(c, "dim", path);
  cfg.block_size = size_key(c, "max_position_embeddings", path);
  cfg.mlp.width = size_key(c, "hidden_dim", path);
  require(cfg.n_embd % cfg.n_head == 0, path, "n_heads", cfg.n_head, "a divisor of dim");
  cfg.mlp.gelu_tanh = tanh_gelu(string_key(c, "activation", path, "gelu"), path, "activation");
  cfg.norm.eps = kDistilBertEps;
  cfg.compat.type_vocab_size = 0;
  cfg.causal = false;
  cfg.bias = true;
  cfg.norm.post = true;
  cfg.compat.mlm_transform = name == "DistilBertForMaskedLM";
  return cfg;
}

NamedTensors read_weights(NamedTensors tensors, const TransformerConfig& cfg, const json&, const std::string& source) {
  const HfTensors hf(std::move(tensors), source);
  NamedTensors out;
  const std::string p = hf.has_prefix("distilbert.") ? "distilbert." : "";  // DistilBertFor*'s base model prefix
  put(out, "wte.weight", hf.get(p + "embeddings.word_embeddings.weight"));
  put(out, "wpe.weight", hf.get(p + "embeddings.position_embeddings.weight"));
  put_linear(out, hf, p + "embeddings.LayerNorm", "emb_norm");
  for (int64_t i = 0; i < cfg.n_layer; ++i) {
    const std::string h = fmt::format("{}transformer.layer.{}.", p, i), s = fmt::format("blocks.{}.", i);
    for (const std::string& part : {"weight", "bias"})
      put(out, s + "attn.qkv." + part,
          joined_rows(hf, {{h + "attention.q_lin." + part, -1}, {h + "attention.k_lin." + part, -1},
                           {h + "attention.v_lin." + part, -1}}));
    put_linear(out, hf, h + "attention.out_lin", s + "attn.proj");
    put_linear(out, hf, h + "sa_layer_norm", s + "ln1");
    put_linear(out, hf, h + "ffn.lin1", s + "mlp.fc");
    put_linear(out, hf, h + "ffn.lin2", s + "mlp.proj");
    put_linear(out, hf, h + "output_layer_norm", s + "ln2");
  }
  if (cfg.compat.mlm_transform) {  // vocab_transform, the activation, vocab_layer_norm, then the tied vocab_projector
    put_linear(out, hf, "vocab_transform", "mlm_dense");
    put_linear(out, hf, "vocab_layer_norm", "mlm_norm");
    put(out, "mlm_bias", hf.get("vocab_projector.bias"));
    require_tied(hf, "vocab_projector.weight", out["model.wte.weight"], "differs from the word embeddings",
                 "spread ties the MLM decoder to the input embedding: only tied models load");
  }
  return out;
}

bool holds(const TransformerConfig& cfg) {
  return !cfg.causal && cfg.norm.post && cfg.compat.type_vocab_size == 0 && cfg.norm.eps == kDistilBertEps;
}

// DistilBertModel (the MLM head, when the run has one, is not written: encoders are exported for their vectors).
json write_config(const TransformerConfig& cfg, const ConfigTokenIds& ids) {
  return {{"architectures", {"DistilBertModel"}},
          {"model_type", "distilbert"},
          {"vocab_size", cfg.vocab_size},
          {"max_position_embeddings", cfg.block_size},
          {"sinusoidal_pos_embds", false},
          {"n_layers", cfg.n_layer},
          {"n_heads", cfg.n_head},
          {"dim", cfg.n_embd},
          {"hidden_dim", cfg.mlp_width()},
          {"activation", cfg.mlp.gelu_tanh ? "gelu_new" : "gelu"},
          {"dropout", cfg.dropout},
          {"attention_dropout", cfg.dropout},
          {"initializer_range", 0.02},
          {"pad_token_id", std::max(ids.pad, 0)},
          {"tie_word_embeddings", true},
          {"torch_dtype", "float32"}};
}

NamedTensors write_weights(const NamedTensors& params, const TransformerConfig& cfg) {
  NamedTensors out;
  auto linear = [&](const std::string& from, const std::string& to) {
    out[to + ".weight"] = param(params, from + ".weight");
    out[to + ".bias"] = param(params, from + ".bias");
  };
  out["embeddings.word_embeddings.weight"] = param(params, "wte.weight");
  out["embeddings.position_embeddings.weight"] = param(params, "wpe.weight");
  linear("emb_norm", "embeddings.LayerNorm");
  for (int64_t i = 0; i < cfg.n_layer; ++i) {
    const std::string s = fmt::format("blocks.{}.", i), h = fmt::format("transformer.layer.{}.", i);
    write_split_qkv(out, params, cfg, s, h, {"attention.q_lin", "attention.k_lin", "attention.v_lin"});
    linear(s + "attn.proj", h + "attention.out_lin");
    linear(s + "ln1", h + "sa_layer_norm");
    linear(s + "mlp.fc", h + "ffn.lin1");
    linear(s + "mlp.proj", h + "ffn.lin2");
    linear(s + "ln2", h + "output_layer_norm");
  }
  return out;
}

}  // namespace

Architecture distilbert_architecture() {
  return {"distilbert", "bert", {"DistilBertModel", "DistilBertForMaskedLM"}, {"distilbert"}, /*encoder=*/true,
          read_config, read_weights, holds, write_config, write_weights};
}

}  // namespace spread::arch
