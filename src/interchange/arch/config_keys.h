#pragma once
// Typed reading of config.json keys, each refusal a UserError naming the file, the key and its value (nlohmann's own
// accessors throw type_error, an abort instead of exit 2). Shared by the architectures and the wrappers' readers.
#include <cstdint>
#include <optional>
#include <string>
#include <nlohmann/json.hpp>

#include "spread/model/transformer.h"

namespace spread::arch {

using json = nlohmann::json;

// A non-negative integer; `fallback` when the key is missing or null, else missing is an error.
int64_t int_key(const json& config, const std::string& key, const std::string& path,
                std::optional<int64_t> fallback = std::nullopt);
double float_key(const json& config, const std::string& key, const std::string& path, double fallback);
// A size (a width, a count of layers, heads, positions or tokens): at least 1.
int64_t size_key(const json& config, const std::string& key, const std::string& path,
                 std::optional<int64_t> fallback = std::nullopt);
// An epsilon or a rotary base: positive and finite.
double positive_key(const json& config, const std::string& key, const std::string& path, double fallback);
bool bool_key(const json& config, const std::string& key, const std::string& path, bool fallback);
// The string, or `fallback` when the key is missing or null; any other type is refused (a number where an
// activation's name belongs must not pick the default activation).
std::string string_key(const json& config, const std::string& key, const std::string& path,
                       const std::string& fallback);

// A value the loader cannot honour exactly: names it, its value and what is supported.
void require(bool ok, const std::string& path, const std::string& key, const json& value,
             const std::string& supported);
// Whether `act` is the tanh approximation of GELU (gelu_new, gelu_pytorch_tanh, gelu_fast) rather than the exact
// "gelu"; anything else is refused.
bool tanh_gelu(const std::string& act, const std::string& path, const std::string& key);

// The shape keys BERT, Llama and ModernBERT configs share (transformers' names), with the head count checked.
TransformerConfig shape_of(const json& config, const std::string& path);

// A token id for a config.json: the id, or null when there is none (< 0).
json id_or_null(int32_t id);

}  // namespace spread::arch
