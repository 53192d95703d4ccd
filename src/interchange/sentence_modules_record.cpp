#include "spread/interchange/sentence_modules_record.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "spread/util/error.h"
#include "spread/util/file.h"
#include "spread/util/json_depth.h"
#include "spread/util/model_folder.h"

namespace fs = std::filesystem;

namespace spread {

std::optional<SentenceTransformersModules> sentence_modules_of(const std::string& init_from) {
  if (init_from.empty() || !is_foreign_model_folder(init_from)) return std::nullopt;
  return read_hf_model_folder(init_from, /*with_weights=*/false).sentence;
}

void record_sentence_modules(const std::string& run_dir, const SentenceTransformersModules& modules) {
  const nlohmann::json record = {{"normalize", modules.normalize},
                                 {"include_prompt", modules.include_prompt},
                                 {"prompts", modules.prompts},
                                 {"default_prompt_name", modules.default_prompt_name}};
  write_file_atomic((fs::path(run_dir) / kSentenceModulesRecord).string(), record.dump(2) + "\n");
}

std::optional<SentenceTransformersModules> recorded_sentence_modules(const std::string& run_dir) {
  const std::string path = (fs::path(run_dir) / kSentenceModulesRecord).string();
  if (!fs::exists(path)) return std::nullopt;
  const auto text = read_whole_file(path);
  if (!text) throw user_error(path, 0, "", "cannot be read");
  refuse_deep_json(*text, path);
  const auto record = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  const auto bad = [&](const std::string& key) {
    return user_error(path, 0, key, "is missing or of another type than spread wrote",
                      "delete the file to export without the folder's Normalize and prompts, or retrain the run");
  };
  if (!record.is_object()) throw bad("");
  SentenceTransformersModules modules;
  const auto flag = [&](const char* key) {
    if (!record.contains(key) || !record[key].is_boolean()) throw bad(key);
    return record[key].get<bool>();
  };
  modules.normalize = flag("normalize");
  modules.include_prompt = flag("include_prompt");
  if (!record.contains("prompts") || !record["prompts"].is_object()) throw bad("prompts");
  for (const auto& [name, prompt] : record["prompts"].items()) {
    if (!prompt.is_string()) throw bad("prompts." + name);
    modules.prompts[name] = prompt.get<std::string>();
  }
  if (!record.contains("default_prompt_name") || !record["default_prompt_name"].is_string())
    throw bad("default_prompt_name");
  modules.default_prompt_name = record["default_prompt_name"].get<std::string>();
  return modules;
}

}  // namespace spread
