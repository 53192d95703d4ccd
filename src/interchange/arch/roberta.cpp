// RoBERTa and XLM-RoBERTa (transformers' modeling_roberta.py, modeling_xlm_roberta.py): RobertaModel,
// RobertaForMaskedLM, XLMRobertaModel, XLMRobertaForMaskedLM. BERT's blocks and names (under "roberta." in the
// *For* models), with one difference: position ids start after the padding id, at pad_token_id + 1 (RoBERTa's
// create_position_ids_from_input_ids), so the first pad_token_id + 1 rows of position_embeddings are never used by a
// text. spread's learned positions start at 0: the model reads rows pad_token_id + 1 onwards, and its block_size is
// max_position_embeddings - pad_token_id - 1 (514 - 2 = 512 for roberta-base). Exact for texts padded on the right,
// as spread pads. Read only: spread writes such a model as BertModel, which computes the same from position 0.
// The MLM head (lm_head) applies the exact GELU whatever hidden_act says, so a head with another activation is
// refused.
#include <fmt/format.h>

#include "bert_parts.h"
#include "config_keys.h"
#include "registry.h"
#include "spread/util/error.h"

namespace spread::arch {
namespace {

int64_t position_offset(const json& c, const std::string& path) { return int_key(c, "pad_token_id", path, 1) + 1; }

TransformerConfig read_config(const json& c, const std::string& path, const std::string& name) {
  const bool mlm_head = name == "RobertaForMaskedLM" || name == "XLMRobertaForMaskedLM";
  TransformerConfig cfg = bert_family_config(c, path, mlm_head);
  const int64_t offset = position_offset(c, path);
  if (cfg.block_size <= offset)
    throw user_error(path, 0, "max_position_embeddings",
                     fmt::format("is {}, which leaves no position after the padding id's {}", cfg.block_size,
                                 offset - 1),
                     "a RoBERTa config has pad_token_id + 1 + the longest text (514 for roberta-base)");
  cfg.block_size -= offset;
  cfg.norm.eps = positive_key(c, "layer_norm_eps", path, 1e-5);
  if (mlm_head)
    require(!cfg.mlp.gelu_tanh, path, "hidden_act", string_key(c, "hidden_act", path, ""), "gelu with an MLM head");
  return cfg;
}

NamedTensors read_weights(NamedTensors tensors, const TransformerConfig& cfg, const json& config,
                          const std::string& source) {
  const HfTensors hf(std::move(tensors), source);
  const int64_t offset = position_offset(config, source);
  NamedTensors out;
  const std::string p = hf.has_prefix("roberta.") ? "roberta." : "";
  const torch::Tensor& positions = hf.get(p + "embeddings.position_embeddings.weight");
  if (positions.dim() != 2 || positions.size(0) < offset + cfg.block_size)
    throw user_error(source, 0, p + "embeddings.position_embeddings.weight",
                     fmt::format("has {} rows but config.json implies {}", positions.dim() ? positions.size(0) : 0,
                                 offset + cfg.block_size),
                     "was the folder saved by transformers with this config.json?");
  put(out, "wte.weight", hf.get(p + "embeddings.word_embeddings.weight"));
  put(out, "wpe.weight", positions.narrow(0, offset, cfg.block_size));
  put(out, "wtt.weight", hf.get(p + "embeddings.token_type_embeddings.weight"));
  put_linear(out, hf, p + "embeddings.LayerNorm", "emb_norm");
  put_post_norm_layers(out, hf, p, cfg.n_layer);
  if (cfg.compat.mlm_transform) {  // lm_head: dense, GELU, layer_norm, the tied decoder and its bias
    put_linear(out, hf, "lm_head.dense", "mlm_dense");
    put_linear(out, hf, "lm_head.layer_norm", "mlm_norm");
    const torch::Tensor* bias = hf.find("lm_head.bias");
    put(out, "mlm_bias", bias ? *bias : hf.get("lm_head.decoder.bias"));
    require_tied(hf, "lm_head.decoder.weight", out["model.wte.weight"], "differs from the word embeddings",
                 "spread ties the MLM decoder to the input embedding: only tied models load");
  }
  return out;
}

}  // namespace

Architecture roberta_architecture() {
  return {"roberta", "bert",
          {"RobertaModel", "RobertaForMaskedLM", "XLMRobertaModel", "XLMRobertaForMaskedLM"},
          {"roberta", "xlm-roberta"}, /*encoder=*/true, read_config, read_weights, nullptr, nullptr, nullptr};
}

}  // namespace spread::arch
