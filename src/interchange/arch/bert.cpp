// BERT (transformers' modeling_bert.py, configuration_bert.py): BertModel, BertForMaskedLM, BertForPreTraining.
// Post-LayerNorm blocks with a LayerNorm after the embeddings; spread's post_norm model computes the same once the
// fused QKV is split into query, key and value. The pooler is neither read nor written (sentence-transformers does
// not use it; transformers initialises one and says so). HF masks padding with the dtype's minimum where spread uses
// -inf: the same softmax.
#include <fmt/format.h>

#include "bert_parts.h"
#include "config_keys.h"
#include "registry.h"
#include "spread/util/error.h"

namespace spread::arch {

TransformerConfig bert_family_config(const json& c, const std::string& path, bool mlm_head) {
  require(string_key(c, "position_embedding_type", path, "absolute") == "absolute", path, "position_embedding_type",
          c.contains("position_embedding_type") ? c["position_embedding_type"] : json(), "absolute");
  require(!bool_key(c, "is_decoder", path, false), path, "is_decoder", true, "false (an encoder)");
  require(!bool_key(c, "add_cross_attention", path, false), path, "add_cross_attention", true, "false");
  TransformerConfig cfg = shape_of(c, path);
  cfg.compat.type_vocab_size = int_key(c, "type_vocab_size", path, 2);
  cfg.norm.eps = positive_key(c, "layer_norm_eps", path, 1e-12);
  cfg.mlp.gelu_tanh = tanh_gelu(string_key(c, "hidden_act", path, "gelu"), path, "hidden_act");
  require(cfg.compat.type_vocab_size > 0, path, "type_vocab_size", cfg.compat.type_vocab_size, "at least 1");
  cfg.causal = false;
  cfg.bias = true;
  cfg.norm.post = true;
  cfg.compat.mlm_transform = mlm_head;
  return cfg;
}

std::string put_bert_embeddings(NamedTensors& out, const HfTensors& hf) {
  const std::string p = hf.has_prefix("bert.") ? "bert." : "";
  put(out, "wte.weight", hf.get(p + "embeddings.word_embeddings.weight"));
  put(out, "wpe.weight", hf.get(p + "embeddings.position_embeddings.weight"));
  put(out, "wtt.weight", hf.get(p + "embeddings.token_type_embeddings.weight"));
  return p;
}

void put_attention(NamedTensors& out, const HfTensors& hf, const std::string& h, const std::string& s) {
  for (const std::string& part : {"weight", "bias"}) {
    const std::string self = h + "attention.self.";
    put(out, s + "attn.qkv." + part, joined_rows(hf, {{self + "query." + part, -1}, {self + "key." + part, -1},
                                                      {self + "value." + part, -1}}));
  }
  put_linear(out, hf, h + "attention.output.dense", s + "attn.proj");
}

void put_post_norm_layers(NamedTensors& out, const HfTensors& hf, const std::string& prefix, int64_t n_layer) {
  for (int64_t i = 0; i < n_layer; ++i) {
    const std::string h = fmt::format("{}encoder.layer.{}.", prefix, i), s = fmt::format("blocks.{}.", i);
    put_attention(out, hf, h, s);
    put_linear(out, hf, h + "attention.output.LayerNorm", s + "ln1");
    put_linear(out, hf, h + "intermediate.dense", s + "mlp.fc");
    put_linear(out, hf, h + "output.dense", s + "mlp.proj");
    put_linear(out, hf, h + "output.LayerNorm", s + "ln2");
  }
}

void write_split_qkv(NamedTensors& out, const NamedTensors& params, const TransformerConfig& cfg,
                     const std::string& s, const std::string& h, const std::array<const char*, 3>& names) {
  const int64_t C = cfg.n_embd;
  const torch::Tensor w = param(params, s + "attn.qkv.weight");
  const torch::Tensor b = bias_or_zeros(params, s + "attn.qkv.bias", 3 * C);
  for (int64_t p = 0; p < 3; ++p) {
    out[h + names[size_t(p)] + ".weight"] = w.narrow(0, p * C, C).contiguous();
    out[h + names[size_t(p)] + ".bias"] = b.narrow(0, p * C, C).contiguous();
  }
}

json bert_family_json(const TransformerConfig& cfg, int32_t pad_id, const std::string& class_name,
                      const std::string& model_type) {
  return {{"architectures", {class_name}},
          {"model_type", model_type},
          {"vocab_size", cfg.vocab_size},
          {"hidden_size", cfg.n_embd},
          {"num_hidden_layers", cfg.n_layer},
          {"num_attention_heads", cfg.n_head},
          {"intermediate_size", cfg.mlp_width()},
          {"hidden_act", cfg.mlp.gelu_tanh ? "gelu_new" : "gelu"},
          {"hidden_dropout_prob", cfg.dropout},
          {"attention_probs_dropout_prob", cfg.dropout},
          {"max_position_embeddings", cfg.block_size},
          // spread's own encoders have no segments: MegatronBert's config still needs a count
          {"type_vocab_size", cfg.compat.type_vocab_size > 0 ? cfg.compat.type_vocab_size : 2},
          {"initializer_range", 0.02},
          {"layer_norm_eps", cfg.norm.eps},
          {"pad_token_id", std::max(pad_id, 0)},
          {"position_embedding_type", "absolute"},
          {"use_cache", false},
          {"torch_dtype", "float32"}};
}

namespace {

// BertModel has no MLM head; BertForMaskedLM and BertForPreTraining keep one (the latter beside the NSP head).
TransformerConfig read_config(const json& c, const std::string& path, const std::string& name) {
  return bert_family_config(c, path, /*mlm_head=*/name != "BertModel" && name != "bert");
}

NamedTensors read_weights(NamedTensors tensors, const TransformerConfig& cfg, const json&, const std::string& source) {
  const HfTensors hf(std::move(tensors), source);
  NamedTensors out;
  const std::string p = put_bert_embeddings(out, hf);
  put_linear(out, hf, p + "embeddings.LayerNorm", "emb_norm");
  put_post_norm_layers(out, hf, p, cfg.n_layer);
  if (cfg.compat.mlm_transform) {
    put_linear(out, hf, "cls.predictions.transform.dense", "mlm_dense");
    put_linear(out, hf, "cls.predictions.transform.LayerNorm", "mlm_norm");
    const torch::Tensor* bias = hf.find("cls.predictions.bias");
    put(out, "mlm_bias", bias ? *bias : hf.get("cls.predictions.decoder.bias"));
    require_tied(hf, "cls.predictions.decoder.weight", out["model.wte.weight"], "differs from the word embeddings",
                 "spread ties the MLM decoder to the input embedding: only tied models load");
  }
  return out;
}

// A post-LN encoder with token types (an imported BERT) goes back as BertModel (one without is DistilBERT's).
bool holds(const TransformerConfig& cfg) { return !cfg.causal && cfg.norm.post && cfg.compat.type_vocab_size > 0; }

json write_config(const TransformerConfig& cfg, const ConfigTokenIds& ids) {
  return bert_family_json(cfg, ids.pad, "BertModel", "bert");
}

NamedTensors write_weights(const NamedTensors& params, const TransformerConfig& cfg) {
  NamedTensors out;
  auto copy = [&](const std::string& from, const std::string& to) { out[to] = param(params, from); };
  auto linear = [&](const std::string& from, const std::string& to) {
    copy(from + ".weight", to + ".weight");
    copy(from + ".bias", to + ".bias");
  };
  copy("wte.weight", "embeddings.word_embeddings.weight");
  copy("wpe.weight", "embeddings.position_embeddings.weight");
  copy("wtt.weight", "embeddings.token_type_embeddings.weight");
  linear("emb_norm", "embeddings.LayerNorm");
  for (int64_t i = 0; i < cfg.n_layer; ++i) {
    const std::string s = fmt::format("blocks.{}.", i), h = fmt::format("encoder.layer.{}.", i);
    write_split_qkv(out, params, cfg, s, h, kBertQkv);
    linear(s + "attn.proj", h + "attention.output.dense");
    linear(s + "ln1", h + "attention.output.LayerNorm");
    linear(s + "mlp.fc", h + "intermediate.dense");
    linear(s + "mlp.proj", h + "output.dense");
    linear(s + "ln2", h + "output.LayerNorm");
  }
  return out;
}

}  // namespace

Architecture bert_architecture() {
  return {"bert", "bert", {"BertModel", "BertForMaskedLM", "BertForPreTraining"}, {"bert"}, /*encoder=*/true,
          read_config, read_weights, holds, write_config, write_weights};
}

}  // namespace spread::arch
