#include "spread/util/model_folder.h"

#include <filesystem>

namespace spread {

namespace fs = std::filesystem;

bool is_model_folder(const std::string& dir) {
  const fs::path d = dir;
  return fs::is_directory(d) && !fs::exists(d / "recipe.toml") &&
         (fs::exists(d / "config.json") || fs::exists(d / "modules.json"));
}

bool is_foreign_model_folder(const std::string& dir) {
  return is_model_folder(dir) && !fs::exists(fs::path(dir) / "spread_tokenizer.json");
}

bool is_hf_model_dir(const std::string& dir) {
  const fs::path d = dir;
  return fs::exists(d / "config.json") && fs::exists(d / "model.safetensors") && !fs::exists(d / "recipe.toml");
}

}  // namespace spread
