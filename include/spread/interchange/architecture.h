#pragma once
// The Hugging Face architectures spread reads and writes. Each has one file in src/interchange/arch/ holding both
// directions (config.json to a TransformerConfig and the folder's tensors to spread's, and back), registered in one
// table (src/interchange/arch/registry.cpp) that import (hf_import.h), export (export.h) and every --model command
// consult:
//   bert           BertModel, BertForMaskedLM, BertForPreTraining: post-LayerNorm blocks, token types, the
//                  embedding LayerNorm, the MLM prediction head; the encoder under "bert." or not
//   megatron-bert  MegatronBertModel: the pre-LayerNorm BERT, the layout of spread's own encoders' exports
//   distilbert     DistilBertModel, DistilBertForMaskedLM: BERT's blocks without token types, names of its own
//   roberta        RobertaModel, RobertaForMaskedLM, XLMRoberta*: BERT's blocks, positions after the padding id
//                  (read only: written as BertModel, the same function)
//   gpt2           GPT2LMHeadModel, GPT2Model: Conv1D weights transposed, tied head
//   llama          LlamaForCausalLM: RMSNorm, rotary positions, SwiGLU, grouped-query attention, no biases
//   modernbert     ModernBertModel, ModernBertForMaskedLM: rotary positions with a global and a local base, local
//                  attention, gated GELU MLP, bias-free LayerNorms, an embedding norm
// An architecture is exact or refused: a config value or tensor it cannot honour is a UserError naming the file,
// the key or tensor, and what is supported. Adding one is a file in src/interchange/arch/ and a line in the table.
#include <cstdint>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "spread/data/safetensors.h"
#include "spread/model/transformer.h"

namespace spread {

// The token ids a config.json names; -1 when the tokenizer has none.
struct ConfigTokenIds {
  int32_t pad = -1, cls = -1, sep = -1, bos = -1, eos = -1;
};

struct Architecture {
  std::string layout;               // "bert", "megatron-bert", "distilbert", "gpt2", "llama", "modernbert"
  std::string family;               // "bert" (BERT, MegatronBert, DistilBERT), "gpt2", "llama", "modernbert"
  std::vector<std::string> names;        // config.json's `architectures` entries that select it
  std::vector<std::string> model_types;  // config.json's `model_type` values that select it (no `architectures`)
  bool encoder = false;                  // bidirectional (sentence-transformers and PyLate folders wrap only these)

  // config.json -> the model. `name` is the entry of `names` or `model_types` the file gave (the *ForMaskedLM
  // forms keep a head).
  TransformerConfig (*read_config)(const nlohmann::json& config, const std::string& path, const std::string& name);
  // The folder's tensors -> "model.<spread name>" for load_model_weights.
  NamedTensors (*read_weights)(NamedTensors tensors, const TransformerConfig& cfg, const nlohmann::json& config,
                               const std::string& source);
  // Whether this layout computes exactly the model of `cfg`: no two architectures hold the same model, and export
  // writes the one that holds it. Null for an architecture spread reads only (its models are written in another's
  // layout, the same function).
  bool (*holds)(const TransformerConfig& cfg);
  nlohmann::json (*write_config)(const TransformerConfig& cfg, const ConfigTokenIds& ids);
  // spread's parameters by spread name (spread_parameters) -> the architecture's state dict.
  NamedTensors (*write_weights)(const NamedTensors& params, const TransformerConfig& cfg);
};

const std::vector<Architecture>& architectures();
// The architecture config.json names (its `architectures[0]`, else its `model_type`); nullptr when spread has none.
const Architecture* architecture_named(const std::string& name);
// The architecture of a layout name ("gpt2"); a name not in the table is a bug (std::out_of_range).
const Architecture& architecture(const std::string& layout);
// The one that holds `cfg` exactly, or nullptr.
const Architecture* architecture_holding(const TransformerConfig& cfg);
// Every class name of the table (`names`), for errors: "BertModel, BertForMaskedLM, ...".
std::string supported_architectures();

// The model's parameters by spread name ("wte.weight", "blocks.0.attn.qkv.weight", ...), detached, on the CPU.
NamedTensors spread_parameters(const Transformer& model);

}  // namespace spread
