#pragma once
// Reading one component of a tokenizer.json: typed fields with defaults as the crate's serde has them, and one
// UserError naming the file, the component's place in it (e.g. "normalizer.normalizers[1]") and the problem for
// a field of the wrong type, an unknown "type" or an option spread does not implement.
#include <nlohmann/json.hpp>

#include <string>

namespace spread::hf {

using Json = nlohmann::json;

struct Where {
  std::string file;
  std::string key;  // the component's place in the file
  Where at(const std::string& sub) const { return {file, key.empty() ? sub : key + "." + sub}; }
  Where index(size_t i) const { return {file, key + "[" + std::to_string(i) + "]"}; }
  [[noreturn]] void fail(const std::string& problem, const std::string& hint = "") const;
  // For "type" values not implemented: names the kind of component and the type.
  [[noreturn]] void unknown_type(const std::string& kind, const std::string& type) const;
};

const Json& field(const Json& j, const char* name, const Where& w);  // required
bool get_bool(const Json& j, const char* name, bool fallback, const Where& w);
std::string get_string(const Json& j, const char* name, const std::string& fallback, const Where& w);
int64_t get_int(const Json& j, const char* name, int64_t fallback, const Where& w);
// The error of a word the model cannot spell when its unk_token is no entry of the vocabulary (the reference fails
// the same way, at encode time): it names the tokenizer file, whose vocabulary is what to fix.
std::string missing_unk_problem(const std::string& unk_token);
inline constexpr const char* kMissingUnkFix = "add the unk_token to model.vocab, or use a tokenizer whose vocabulary has it";

// An integer the reference reads as unsigned (usize, u32): one in 0..max, else fail() naming it.
int64_t get_count(const Json& j, const char* name, int64_t fallback, int64_t max, const Where& w);
const Json& get_array(const Json& j, const char* name, const Where& w);  // required array
std::string type_of(const Json& j, const Where& w);
// The pattern field ({"String": s} or {"Regex": s}) of Split and Replace; *is_regex says which.
std::string pattern_of(const Json& j, bool* is_regex, const Where& w);

}  // namespace spread::hf
