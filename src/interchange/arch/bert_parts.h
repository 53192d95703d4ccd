#pragma once
// What BERT and MegatronBert share (arch/bert.cpp defines these): the config keys, the embeddings, the attention's
// separate query, key and value against spread's fused projection, and the config.json written.
#include <array>
#include <string>
#include <nlohmann/json.hpp>

#include "spread/data/safetensors.h"
#include "spread/model/transformer.h"
#include "tensor_maps.h"

namespace spread::arch {

// BERT's keys (configuration_bert.py): absolute positions, no decoder or cross-attention, token types.
TransformerConfig bert_family_config(const nlohmann::json& c, const std::string& path, bool mlm_head);

// The three embeddings as wte, wpe and wtt; returns the prefix found ("bert.", the base model prefix of BertFor*
// and MegatronBertFor*, or "").
std::string put_bert_embeddings(NamedTensors& out, const HfTensors& hf);
// Layer h's query, key and value as block s's fused projection, whose rows are q | k | v (model/attention.cpp's
// [B, T, 3, H, D] view), and the output projection.
void put_attention(NamedTensors& out, const HfTensors& hf, const std::string& h, const std::string& s);
// The post-LayerNorm layers under `prefix` + "encoder.layer.N." (BERT's names, which RoBERTa shares).
void put_post_norm_layers(NamedTensors& out, const HfTensors& hf, const std::string& prefix, int64_t n_layer);

// The inverse: block s's fused projection split into the three projections named `names` (q, k, v: BERT's
// "attention.self.query" ..., DistilBERT's "attention.q_lin" ...) under layer prefix h; zero biases for a model
// without.
inline constexpr std::array<const char*, 3> kBertQkv = {"attention.self.query", "attention.self.key",
                                                       "attention.self.value"};
void write_split_qkv(NamedTensors& out, const NamedTensors& params, const TransformerConfig& cfg,
                     const std::string& s, const std::string& h, const std::array<const char*, 3>& names);
// config.json of BertModel or MegatronBertModel; pad_id < 0 is written as 0 (the config needs an id; padding is
// masked anyway).
nlohmann::json bert_family_json(const TransformerConfig& cfg, int32_t pad_id, const std::string& class_name,
                                const std::string& model_type);

}  // namespace spread::arch
