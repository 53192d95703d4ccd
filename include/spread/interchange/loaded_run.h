#pragma once
// A finished (or running) run directory opened for inference: the resolved recipe, the tokenizer and the model
// with the weights of the newest valid checkpoint, in eval mode on the recipe's device.
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include <torch/types.h>

#include "spread/config/recipe.h"
#include "spread/data/tokenizer.h"
#include "spread/interchange/hf_import.h"
#include "spread/model/generate.h"
#include "spread/model/transformer.h"

namespace spread {

struct LoadedRun {
  std::string dir;
  Recipe recipe;
  std::shared_ptr<Tokenizer> tokenizer;
  Transformer model{nullptr};
  int64_t step = 0;  // step of the checkpoint that was loaded
  bool model_folder = false;  // a Hugging Face / sentence-transformers folder, not a run (recipe: the folder's)
  std::optional<SentenceTransformersModules> sentence;  // its sentence-transformers modules, when it has them
  std::optional<ColbertModules> colbert;                // its PyLate modules, when it has them
};

// Throws UserError (naming the directory and the fix) when the run dir has no recipe or no checkpoint to use
// (none yet, all damaged, or the newest intact one holds NaN or Inf; see checkpoint_to_use). Reads only: works on
// a run that is training.
// A model folder (util/model_folder.h: is_model_folder) is loaded as one, with the recipe it implies and step 0.
LoadedRun load_run(const std::string& run_dir);

// Samples from the run's model and hands the text to `emit` as it is produced: the prompt first, then the text of
// each token as it is drawn (see data/text_stream.h), so a long generation shows progress. An empty prompt (or
// one that encodes to nothing) starts from a newline. A run that is no LM (train.objective other than "lm") is a
// UserError naming its objective.
void generate_text(LoadedRun& run, const std::string& prompt, const SampleOptions& options,
                   const std::function<void(const std::string&)>& emit);

// Hidden states of one text, one [n, F] float tensor per layer (0 = embeddings, i = output of block i), then, as
// the last element, the state after the final norm (what mean pooling and the LM head read), truncated to the
// model's block size (encoder runs: "[CLS] text [SEP]" up to data.max_length). Runs under no_grad.
std::vector<torch::Tensor> text_hidden_states(LoadedRun& run, const std::string& text);

}  // namespace spread
