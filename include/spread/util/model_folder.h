#pragma once
// What a folder given as a model is, from its files alone (no parsing, no LibTorch): the recipe checks, the CLI and
// the trainer all ask the same question.
#include <string>

namespace spread {

// Whether `dir` looks like a model folder (config.json, or modules.json, and no recipe.toml): a run is always read
// as a run.
bool is_model_folder(const std::string& dir);

// A model folder that spread did not export (no spread_tokenizer.json, the run's tokenizer record that an export
// keeps): its own config.json gives the model's shape, and its tokenizer is the recipe's kind "hf" one.
bool is_foreign_model_folder(const std::string& dir);

// Whether `dir` holds a Hugging Face model folder with its weights (config.json and model.safetensors) and is not
// a run directory (no recipe.toml): a run is always read as a run.
bool is_hf_model_dir(const std::string& dir);

}  // namespace spread
