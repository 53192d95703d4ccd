// MegatronBert (transformers' modeling_megatron_bert.py): the pre-LayerNorm BERT, no embedding LayerNorm,
// "attention.ln" before attention, "ln" before the MLP and a final "encoder.ln", learned absolute positions. The same
// function as spread's own bidirectional transformer, so the layout of its encoders' exports: their missing
// token types are written as zeros (type 0's row added everywhere is no change), missing biases as zeros.
#include <fmt/format.h>

#include "bert_parts.h"
#include "config_keys.h"
#include "registry.h"

namespace spread::arch {
namespace {

TransformerConfig read_config(const json& c, const std::string& path, const std::string&) {
  TransformerConfig cfg = bert_family_config(c, path, /*mlm_head=*/false);
  cfg.norm.post = false;
  return cfg;
}

NamedTensors read_weights(NamedTensors tensors, const TransformerConfig& cfg, const json&, const std::string& source) {
  const HfTensors hf(std::move(tensors), source);
  NamedTensors out;
  const std::string p = put_bert_embeddings(out, hf);
  for (int64_t i = 0; i < cfg.n_layer; ++i) {
    const std::string h = fmt::format("{}encoder.layer.{}.", p, i), s = fmt::format("blocks.{}.", i);
    put_linear(out, hf, h + "attention.ln", s + "ln1");
    put_attention(out, hf, h, s);
    put_linear(out, hf, h + "ln", s + "ln2");
    put_linear(out, hf, h + "intermediate.dense", s + "mlp.fc");
    put_linear(out, hf, h + "output.dense", s + "mlp.proj");
  }
  put_linear(out, hf, p + "encoder.ln", "ln_f");
  return out;
}

bool holds(const TransformerConfig& cfg) { return !cfg.causal && !cfg.norm.post && !is_modernbert_shaped(cfg); }

json write_config(const TransformerConfig& cfg, const ConfigTokenIds& ids) {
  return bert_family_json(cfg, ids.pad, "MegatronBertModel", "megatron-bert");
}

NamedTensors write_weights(const NamedTensors& params, const TransformerConfig& cfg) {
  const int64_t C = cfg.n_embd;
  NamedTensors out;
  out["embeddings.word_embeddings.weight"] = param(params, "wte.weight");
  out["embeddings.position_embeddings.weight"] = param(params, "wpe.weight");
  const auto types = params.find("wtt.weight");
  out["embeddings.token_type_embeddings.weight"] = types != params.end() ? types->second : torch::zeros({2, C});
  out["encoder.ln.weight"] = param(params, "ln_f.weight");
  out["encoder.ln.bias"] = param(params, "ln_f.bias");
  for (int64_t i = 0; i < cfg.n_layer; ++i) {
    const std::string s = fmt::format("blocks.{}.", i), h = fmt::format("encoder.layer.{}.", i);
    auto linear = [&](const std::string& from, const std::string& to, int64_t width) {
      out[h + to + ".weight"] = param(params, s + from + ".weight");
      out[h + to + ".bias"] = bias_or_zeros(params, s + from + ".bias", width);
    };
    out[h + "attention.ln.weight"] = param(params, s + "ln1.weight");
    out[h + "attention.ln.bias"] = param(params, s + "ln1.bias");
    write_split_qkv(out, params, cfg, s, h, kBertQkv);
    linear("attn.proj", "attention.output.dense", C);
    out[h + "ln.weight"] = param(params, s + "ln2.weight");
    out[h + "ln.bias"] = param(params, s + "ln2.bias");
    linear("mlp.fc", "intermediate.dense", cfg.mlp_width());
    linear("mlp.proj", "output.dense", C);
  }
  return out;
}

}  // namespace

Architecture megatron_bert_architecture() {
  return {"megatron-bert", "bert", {"MegatronBertModel"}, {"megatron-bert"}, /*encoder=*/true,
          read_config, read_weights, holds, write_config, write_weights};
}

}  // namespace spread::arch
