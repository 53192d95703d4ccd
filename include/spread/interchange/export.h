#pragma once
// `spread export`: a run's checkpoint as a folder that the Python ecosystem loads (interchange/architecture.h):
//   causal LM   config.json + model.safetensors of GPT2LMHeadModel (AutoModelForCausalLM.from_pretrained(dir))
//   encoder     config.json + model.safetensors of MegatronBertModel, around it a sentence-transformers folder
//               (modules.json, config_sentence_transformers.json, sentence_bert_config.json, 1_Pooling/config.json)
//   maxsim      the encoder's MegatronBertModel files in PyLate's layout: 1_Dense/ (config.json, model.safetensors
//               with the multi-vector head as linear.weight) instead of 1_Pooling, and the ColBERT keys of
//               config_sentence_transformers.json (models.ColBERT(dir))
// and in each the tokenizer: tokenizer.json, tokenizer_config.json and special_tokens_map.json where the kind has a
// Hugging Face form (interchange/hf_tokenizer.h), the run's own files (tokenizer.model or tokenizer.chars, spread's
// record as spread_tokenizer.json), and spread_export.json (layout, run, step), which marks the folder as an export.
//
// Promises: the same checkpoint gives byte-identical files; the folder appears whole or not at all (written under a
// temporary name beside it, then renamed); an existing folder is replaced only when it is an earlier export, never
// when it holds anything else or contains the run. Bad input is a UserError naming the path and the fix.
#include <cstdint>
#include <optional>
#include <string>

#include "spread/data/safetensors.h"
#include "spread/model/transformer.h"

namespace spread {

struct ExportRequest {
  std::string run_dir;
  std::string out_dir;
  std::optional<int64_t> step;  // a checkpoint of the run; nullopt = the newest intact one
};

struct ExportResult {
  std::string layout;  // "gpt2", "megatron-bert", "bert" (a post-LN encoder) or "pylate"
  int64_t step = 0;
  int64_t bytes = 0;   // of model.safetensors
};

ExportResult export_run(const ExportRequest& request);

inline constexpr const char* kExportMarker = "spread_export.json";

// [train] init_from of an exported LM folder: its GPT-2 or Llama weights as "model.<name>" tensors for
// load_model_weights, for a model of shape `cfg`. UserError naming the folder's file when it is neither or its
// shape differs from cfg's.
NamedTensors read_exported_lm_weights(const std::string& dir, const TransformerConfig& cfg);

}  // namespace spread
