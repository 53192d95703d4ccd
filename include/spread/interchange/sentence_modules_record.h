#pragma once
// What a run started from a sentence-transformers folder keeps of the folder's wrapper for its export: whether a
// Normalize module follows the pooling, the pooling's include_prompt, the prompts and the default prompt's name.
// The run's weights and pooling are its own; these settings are not in any recipe key, and without them an export
// of a fine-tuned all-MiniLM-L6-v2 would give vectors of another length than the model it came from.
#include <optional>
#include <string>

#include "spread/interchange/hf_import.h"

namespace spread {

inline constexpr const char* kSentenceModulesRecord = "sentence_transformers.json";

// The wrapper of a sentence-transformers folder given as train.init_from; nullopt for any other init_from.
std::optional<SentenceTransformersModules> sentence_modules_of(const std::string& init_from);

// Writes RUN_DIR/sentence_transformers.json.
void record_sentence_modules(const std::string& run_dir, const SentenceTransformersModules& modules);

// The record of a run started from a sentence-transformers folder; nullopt for any other run. A record that is not
// what record_sentence_modules writes is a UserError naming the file.
std::optional<SentenceTransformersModules> recorded_sentence_modules(const std::string& run_dir);

}  // namespace spread
