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
#include "spread/run/run_files.h"

namespace spread {

// The model of the recipe for a tokenizer of `vocab_size` ids: model.vocab_size rows when set (UserError naming the
// key when that is fewer), else vocab_size.
TransformerConfig model_config(const Recipe& recipe, int64_t vocab_size);

// `spread train --resume RUN_DIR [--set ...]`: the recipe saved in the run dir, with overrides applied.
Recipe recipe_of_run(const std::string& run_dir, const std::vector<std::string>& overrides = {});

// tokenizer.lowercase against the run's tokenizer, which decides (it is saved with the run, or copied by
// init_from): a UserError naming the key when they differ.
void check_lowercase_matches(const Recipe& recipe, const Tokenizer& tokenizer);

// Parses run.device and checks that it exists here (UserError naming run.device otherwise).
torch::Device recipe_device(const Recipe& recipe);

// A training token stream: the text's train.bin or data.shards (weight 1), or one [[data.mix]] entry.
struct TrainTokens {
  std::unique_ptr<TokenFile> tokens;
  double weight = 1.0;
  std::string key;  // the recipe key that named its files ("data.shards", "data.mix[1].shards"); "" for train.bin
};

struct RunData {
  std::shared_ptr<Tokenizer> tokenizer;
  std::vector<TrainTokens> train;  // one stream, or a mixture's
  std::unique_ptr<TokenFile> val;
};

// The files a data.shards pattern names (glob(7)), in name order; UserError naming `key` and the recipe `source`
// when there are none.
std::vector<std::string> shard_files(const std::string& pattern, const std::string& key, const std::string& source);

// A recipe's shard file pattern, with the key that gave it and its share of the training windows.
struct ShardPattern {
  std::string key, pattern;
  double weight = 1.0;
};
// The training patterns (data.shards, or each [[data.mix]] entry as "data.mix[i].shards"); empty without shards.
std::vector<ShardPattern> train_shard_patterns(const Recipe& recipe);
// Every shard file the recipe names now, by key, the training sets then data.val_shards: what a run records when
// it starts and checks when it resumes (run/run_files.h). Empty without shards.
std::vector<ShardList> shard_lists(const Recipe& recipe);

// An LM run's validation tokens: its val.bin, or its data.val_shards (ids checked against vocab_size).
std::unique_ptr<TokenFile> validation_tokens(const Recipe& recipe, const std::string& run_dir, int64_t vocab_size);

// Loads the tokenizer and token files cached in run_dir, building (and saving) whichever is missing; with
// data.shards, the tokenizer only, the tokens read from the shards where they are.
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

// A model folder's "model.<name>" tensors with one row per id of a vocabulary of `rows` ids, as transformers'
// resize_token_embeddings(rows) makes them (mean_resizing): rows past the folder's are the mean of its rows (its
// sample of a normal distribution around that mean, with 1e-9 of their covariance, left out), rows past `rows` are
// dropped; for the token embeddings, an untied output layer and the MLM head's bias. Returns the rows added.
int64_t resize_token_rows(std::map<std::string, torch::Tensor>& tensors, int64_t rows);

// Copies a checkpoint's "model.<name>" tensors into the model's parameters (UserError on a mismatch).
// MissingHead::KeepInitial (train.init_from): a checkpoint without the multi-vector head (a backbone trained by
// another objective) leaves the model's freshly initialised head as it is.
enum class MissingHead { Refused, KeepInitial };
void load_model_weights(Transformer& model, const std::map<std::string, torch::Tensor>& tensors,
                        const std::string& source, MissingHead missing_head = MissingHead::Refused);

}  // namespace spread
