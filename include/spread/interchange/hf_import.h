#pragma once
// Reading the models people have: a Hugging Face model folder, or a sentence-transformers folder around one, as a
// spread model with the weights exactly as they are (interchange/export.h has the writing direction).
//   weights      model.safetensors, or the shards listed in model.safetensors.index.json; 16-bit tensors are
//                widened to float32 (spread computes in float32); pytorch_model.bin alone is refused with the
//                command that converts it (a Python pickle, which LibTorch's C++ API does not read), a Git LFS
//                pointer with the note that the file was never downloaded
//   architecture config.json's `architectures` (or `model_type`) picks one of interchange/architecture.h's table:
//                BERT, MegatronBert, GPT-2, Llama, ModernBERT
//   sentence-transformers  modules.json with Transformer (weights in the folder or its module path), Pooling
//                (mean, cls, max, lasttoken, weightedmean; include_prompt), Normalize; sentence_bert_config.json's
//                max_seq_length and do_lower_case; config_sentence_transformers.json's prompts and default_prompt_name
//   PyLate       a ColBERT folder: the encoder, 1_Dense (and 2_Dense: their product is the one head; no bias,
//                identity activation), config_sentence_transformers.json's query/document prefixes (added tokens
//                such as "[Q] "), lengths, do_query_expansion and skiplist_words
// Anything else (another architecture, a pooling mode or option the library has that spread does not, relative
// positions, a cross-attention decoder, a tensor missing or of another shape) is a UserError naming the file, the
// key or tensor and what is supported: never an approximation.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "spread/config/recipe.h"
#include "spread/data/safetensors.h"
#include "spread/model/transformer.h"
#include "spread/util/model_folder.h"

namespace spread {

struct SentenceTransformersModules {
  std::string pooling = "mean";  // spread's name (pooling/pooling.h): mean | cls | last | max | weightedmean
  bool include_prompt = true;    // false: the prompt's tokens (and [CLS]) are left out of the pooled mean
  bool normalize = false;        // a Normalize module follows the pooling
  int64_t max_seq_length = 0;    // 0 = the model's positions
  bool lowercase = false;        // do_lower_case: Python's str.lower() of each text first (recipe tokenizer.lowercase)
  std::map<std::string, std::string> prompts;  // name -> text prepended to the input
  std::string default_prompt_name;             // "" = none
};

struct ColbertModules {
  std::string query_prefix = "[Q] ", document_prefix = "[D] ";  // tokens inserted after [CLS]
  int64_t query_length = 32, document_length = 180;             // tokens, the prefix included
  bool query_expansion = true;                                  // queries padded with [MASK] that score
  // Vocabulary entries left out of documents; PyLate's default when the folder lists none: string.punctuation.
  std::vector<std::string> skiplist_words = {"!", "\"", "#", "$", "%", "&", "'", "(", ")", "*", "+",
                                             ",", "-", ".", "/", ":", ";", "<", "=", ">", "?", "@",
                                             "[", "\\", "]", "^", "_", "`", "{", "|", "}", "~"};
};

struct HfModelFolder {
  std::string dir;           // the folder given
  std::string model_dir;     // where config.json and the weights are: dir, or the Transformer module's path
  std::string architecture;  // config.json's architectures[0] (or model_type's model when it has none)
  std::string family;        // Architecture::family: "bert" | "gpt2" | "llama" | "modernbert"
  TransformerConfig config;
  NamedTensors weights;      // "model.<spread name>", for load_model_weights
  std::optional<SentenceTransformersModules> sentence;  // a sentence-transformers folder
  std::optional<ColbertModules> colbert;                // a PyLate ColBERT folder (then no `sentence`)
};

// Reads the folder (UserError for anything it cannot load exactly); with_weights = false reads the configuration
// only (weights stays empty), for a recipe that needs the shape before the model exists.
HfModelFolder read_hf_model_folder(const std::string& dir, bool with_weights = true);

// The recipe the folder implies, for the commands that take a run: the model keys from config.json, tokenizer
// kind "hf" from the folder's tokenizer files, objective "lm" (GPT-2), "mlm" (a masked-LM head) or "contrastive"
// (encoders, pooled as the sentence-transformers modules say, else mean) or "maxsim" (PyLate, with its lengths,
// expansion and skiplist), data.max_length the folder's max_seq_length or positions.
Recipe recipe_of_model_folder(const HfModelFolder& folder);

// [train] init_from of a model folder that is not spread's own export: the recipe with the
// folder's architecture keys ([model] shape and options), its tokenizer (kind "hf", path) and, where the recipe
// leaves them at their defaults, its max_seq_length and pooling. A [model] or [tokenizer] value that is not the
// default and differs from the folder's is a UserError naming both. Objective maxsim takes a PyLate folder's head,
// markers, lengths and skiplist; from any other encoder folder it makes a ColBERT as PyLate's models.ColBERT does:
// the recipe's markers, else PyLate's "[Q] " and "[D] ", added to the tokenizer where it lacks them, and
// model.vocab_size the tokenizer's size with them (the rows they add start at the mean of the folder's rows,
// run/setup.h resize_token_rows). Any other recipe is returned as it is.
Recipe adopt_model_folder(const Recipe& recipe);

}  // namespace spread
