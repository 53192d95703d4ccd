#include "spread/util/model_folder.h"

#include <filesystem>
#include <system_error>

namespace spread {

namespace fs = std::filesystem;

namespace {

// The error_code forms: a path that cannot be looked at (a name past the system's limit, a folder without search
// permission) is no model folder, where the throwing forms would end the question with a filesystem_error; the
// reader that opens the path next names the key and the file.
bool is_directory_here(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

bool exists_here(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

}  // namespace

bool is_model_folder(const std::string& dir) {
  const fs::path d = dir;
  return is_directory_here(d) && !exists_here(d / "recipe.toml") &&
         (exists_here(d / "config.json") || exists_here(d / "modules.json"));
}

bool is_foreign_model_folder(const std::string& dir) {
  return is_model_folder(dir) && !exists_here(fs::path(dir) / "spread_tokenizer.json");
}

bool is_hf_model_dir(const std::string& dir) {
  const fs::path d = dir;
  return exists_here(d / "config.json") && exists_here(d / "model.safetensors") && !exists_here(d / "recipe.toml");
}

}  // namespace spread
