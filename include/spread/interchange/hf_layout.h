#pragma once
// spread's transformer under the names and layouts of Hugging Face transformers' models, both ways.
// Names come from transformers' modeling_gpt2.py, modeling_megatron_bert.py and modeling_llama.py.
//
// Causal LM -> GPT2LMHeadModel: spread's blocks are GPT-2's (pre-norm, fused QKV in q|k|v order, MLP 4x, learned
// positions, tied output embedding). GPT-2's Conv1D keeps its weight as [in, out], the transpose of nn.Linear's
// [out, in]; GPT-2 has no switch for biases, so a model trained with bias = false gets zero biases. spread's GELU
// is the exact one (HF "gelu"; GPT-2's default "gelu_new" is the tanh approximation) and its LayerNorm eps 1e-5.
//
// Encoder -> MegatronBertModel: the pre-LayerNorm BERT (no embedding LayerNorm, "attention.ln" before attention,
// "ln" before the MLP, a final "encoder.ln", learned absolute positions, exact GELU), the same function as
// spread's bidirectional transformer once the fused QKV is split into query/key/value and token_type_embeddings
// are zero. (HF masks padding with the dtype's minimum where spread uses -inf: the same softmax.)
#include <cstdint>
#include <string>
#include <nlohmann/json.hpp>

#include "spread/interchange/safetensors.h"
#include "spread/model/transformer.h"

namespace spread {

inline constexpr double kLayerNormEps = 1e-5;  // make_norm in src/model/transformer.cpp

// The model's parameters by spread name ("wte.weight", "blocks.0.attn.qkv.weight", ...), detached, on the CPU.
NamedTensors spread_parameters(const Transformer& model);

// GPT2LMHeadModel's state dict ("transformer.h.0.attn.c_attn.weight", ...; no lm_head.weight: it is tied).
NamedTensors gpt2_tensors(const NamedTensors& params, const TransformerConfig& cfg);
// config.json of GPT2LMHeadModel; bos/eos < 0 are written as null.
nlohmann::json gpt2_config(const TransformerConfig& cfg, int32_t bos_id, int32_t eos_id);

// The inverse of gpt2_tensors for a model of shape `cfg`: "model.<spread name>" tensors for load_model_weights.
// Accepts GPT2Model names too (no "transformer." prefix), ignores the attention mask buffers, takes the first
// block_size rows of a longer wpe, and raises UserError naming `source` when a tensor is missing, the shape
// differs, a bias is non-zero where the model has none, or lm_head.weight is not the tied wte.weight.
NamedTensors spread_tensors_from_gpt2(const NamedTensors& hf, const TransformerConfig& cfg,
                                      const std::string& source);

// MegatronBertModel's state dict ("embeddings.word_embeddings.weight", "encoder.layer.0.attention.self.query.weight",
// ...), without the pooler (sentence-transformers does not use it).
NamedTensors megatron_bert_tensors(const NamedTensors& params, const TransformerConfig& cfg);
// config.json of MegatronBertModel; pad_id < 0 is written as 0 (the config needs an id; padding is masked anyway).
nlohmann::json megatron_bert_config(const TransformerConfig& cfg, int32_t pad_id);

// A post-LayerNorm encoder (an imported BERT, model/transformer.h's post_norm) as BertModel's state dict and
// config.json: the names hf_import reads, without the pooler (sentence-transformers does not use it; transformers
// then initialises one and says so).
NamedTensors bert_tensors(const NamedTensors& params, const TransformerConfig& cfg);
nlohmann::json bert_config(const TransformerConfig& cfg, int32_t pad_id);

// LlamaForCausalLM (transformers' modeling_llama.py) and spread's Llama-style decoder (rope, rmsnorm, swiglu, no
// biases): each spread tensor is the row-wise concatenation of the listed Llama tensors (q_proj, k_proj, v_proj in
// attn.qkv; gate_proj, up_proj in mlp.fc), each with its number of rows. One table for both directions.
struct LlamaTensor {
  std::string spread;                                  // "blocks.0.attn.qkv.weight"
  std::vector<std::pair<std::string, int64_t>> parts;  // {"model.layers.0.self_attn.q_proj.weight", rows}, ...
};
std::vector<LlamaTensor> llama_layout(const TransformerConfig& cfg);
// True when the model is exactly what LlamaForCausalLM computes (export writes that layout for it).
bool is_llama_shaped(const TransformerConfig& cfg);
NamedTensors llama_tensors(const NamedTensors& params, const TransformerConfig& cfg);
// config.json of LlamaForCausalLM; bos/eos < 0 are written as null.
nlohmann::json llama_config(const TransformerConfig& cfg, int32_t bos_id, int32_t eos_id);

// ModernBertModel / ModernBertForMaskedLM (transformers' modeling_modernbert.py) and spread's encoder with its
// options (rope, gated GELU MLP, embedding norm, no norm before block 0, local attention): spread name -> the
// model's own name (ModernBertModel's; "model." in front for the MaskedLM), one table both ways. Biases and norm
// biases appear as the config has them; decoder.weight only when untied (it is the tied embedding otherwise).
std::vector<std::pair<std::string, std::string>> modernbert_layout(const TransformerConfig& cfg);
// True when the model is exactly what ModernBERT computes (export writes that layout for it).
bool is_modernbert_shaped(const TransformerConfig& cfg);
NamedTensors modernbert_tensors(const NamedTensors& params, const TransformerConfig& cfg);
// config.json of ModernBertModel (ModernBertForMaskedLM with the MLM head); ids < 0 are written as null.
nlohmann::json modernbert_config(const TransformerConfig& cfg, int32_t pad_id, int32_t cls_id, int32_t sep_id);

}  // namespace spread
