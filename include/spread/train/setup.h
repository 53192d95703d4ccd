#pragma once
// What every command that opens a run needs: the model shape from the recipe, the device, and the tokenised
// data (tokenizer and token files are built once and cached in the run dir).
#include <memory>
#include <string>
#include <torch/types.h>

#include "spread/config/recipe.h"
#include "spread/data/token_file.h"
#include "spread/data/tokenizer.h"
#include "spread/model/transformer.h"

namespace spread {

TransformerConfig model_config(const Recipe& recipe, int64_t vocab_size);

// [train] init_from of a model folder (export/hf_import.h) that is not spread's own export: the recipe with the
// folder's architecture keys ([model] shape and options), its tokenizer (kind "hf", path) and, where the recipe
// leaves them at their defaults, its max_seq_length and pooling. A [model] or [tokenizer] value that is not the
// default and differs from the folder's is a UserError naming both. Any other recipe is returned as it is.
Recipe adopt_model_folder(const Recipe& recipe);

// Parses run.device and checks that it exists here (UserError naming run.device otherwise).
torch::Device recipe_device(const Recipe& recipe);

struct RunData {
  std::shared_ptr<Tokenizer> tokenizer;
  std::unique_ptr<TokenFile> train;
  std::unique_ptr<TokenFile> val;
};

// Loads the tokenizer and token files cached in run_dir, building (and saving) whichever is missing.
// `log` receives one line per thing built.
RunData prepare_data(const Recipe& recipe, const std::string& run_dir, const std::function<void(const std::string&)>& log);

// [train] init_from: copies the tokenizer files of that run into run_dir (a model is only as good as the ids it
// was trained on). UserError naming train.init_from when that directory has no tokenizer. From a Hugging Face
// GPT-2 folder: the tokenizer of a spread export (spread_tokenizer.json and its file), nothing from another one.
void copy_tokenizer_files(const Recipe& recipe, const std::string& run_dir);

// Whether the model's logits on a fixed sequence (ids 0, 1, 2, ... over one block) are all finite. Weights can be
// finite yet so large that every forward pass overflows (a learning rate far too high), which makes them as
// useless as NaN. Runs in eval mode under no_grad and draws no random numbers, so checking a training run's state
// leaves its course bitwise unchanged.
bool output_is_finite(Transformer& model, const torch::Device& device);

// Copies a checkpoint's "model.<name>" tensors into the model's parameters (UserError on a mismatch).
// MissingHead::KeepInitial (train.init_from): a checkpoint without the multi-vector head (a backbone trained by
// another objective) leaves the model's freshly initialised head as it is.
enum class MissingHead { Refused, KeepInitial };
void load_model_weights(Transformer& model, const std::map<std::string, torch::Tensor>& tensors,
                        const std::string& source, MissingHead missing_head = MissingHead::Refused);

}  // namespace spread
