#pragma once
// The nesting depth of JSON read from files, limited before parsing. nlohmann's parser keeps its own stack, but
// copying, comparing or dumping a value recurses once per level: a config.json nested 100k deep (a few hundred KB)
// overflowed the stack in the first error message that printed it. The readers of this field refuse such files
// (serde_json, under `tokenizers` and `safetensors`: 128 levels); every reader of a JSON file here calls
// refuse_deep_json first, so that no value deeper than this reaches the code that recurses.
#include <string>
#include <string_view>

namespace spread {

// No JSON that spread or the Hugging Face libraries write comes near it: a tokenizer.json nests about 6 levels.
inline constexpr int kMaxJsonDepth = 128;

// Whether `text` has more than kMaxJsonDepth arrays and objects open at once. Brackets inside strings do not count;
// malformed text is left to the parser.
bool json_too_deep(std::string_view text);

// UserError "FILE[:LINE]: JSON nested more than 128 levels deep" when json_too_deep(text).
void refuse_deep_json(std::string_view text, const std::string& file, int line = 0);

}  // namespace spread
