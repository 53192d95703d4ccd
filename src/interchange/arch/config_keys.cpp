#include "config_keys.h"

#include <fmt/format.h>

#include <cmath>
#include <set>

#include "spread/util/error.h"

namespace spread::arch {

int64_t int_key(const json& config, const std::string& key, const std::string& path, std::optional<int64_t> fallback) {
  if (!config.contains(key) || config[key].is_null()) {
    if (fallback) return *fallback;
    throw user_error(path, 0, key, "is missing", "a config.json saved by transformers has it");
  }
  if (!config[key].is_number_integer() || config[key].get<int64_t>() < 0)
    throw user_error(path, 0, key, "is " + config[key].dump() + ", not a non-negative integer");
  return config[key].get<int64_t>();
}

double float_key(const json& config, const std::string& key, const std::string& path, double fallback) {
  if (!config.contains(key) || config[key].is_null()) return fallback;
  if (!config[key].is_number()) throw user_error(path, 0, key, "is " + config[key].dump() + ", not a number");
  return config[key].get<double>();
}

// 0 made LibTorch fail mid-run with exit 1.
int64_t size_key(const json& config, const std::string& key, const std::string& path,
                 std::optional<int64_t> fallback) {
  const int64_t n = int_key(config, key, path, fallback);
  if (n < 1) throw user_error(path, 0, key, "is 0, not a size", "a config.json saved by transformers has it >= 1");
  return n;
}

// A value <= 0 gave NaN outputs with exit 0.
double positive_key(const json& config, const std::string& key, const std::string& path, double fallback) {
  const double x = float_key(config, key, path, fallback);
  if (!(x > 0) || !std::isfinite(x))
    throw user_error(path, 0, key, "is " + config[key].dump() + ", not a positive number");
  return x;
}

bool bool_key(const json& config, const std::string& key, const std::string& path, bool fallback) {
  if (!config.contains(key) || config[key].is_null()) return fallback;
  if (!config[key].is_boolean()) throw user_error(path, 0, key, "is " + config[key].dump() + ", not true or false");
  return config[key].get<bool>();
}

std::string string_key(const json& config, const std::string& key, const std::string& path,
                       const std::string& fallback) {
  if (!config.contains(key) || config[key].is_null()) return fallback;
  if (!config[key].is_string()) throw user_error(path, 0, key, "is " + config[key].dump() + ", not a string");
  return config[key].get<std::string>();
}

void require(bool ok, const std::string& path, const std::string& key, const json& value,
             const std::string& supported) {
  if (!ok)
    throw user_error(path, 0, key, "is " + value.dump() + ", which spread does not implement",
                     "supported: " + supported);
}

// gelu_new, gelu_pytorch_tanh and gelu_fast are implementations of the same tanh approximation (they agree to float
// rounding).
bool tanh_gelu(const std::string& act, const std::string& path, const std::string& key) {
  static const std::set<std::string> tanh_forms = {"gelu_new", "gelu_pytorch_tanh", "gelu_fast"};
  if (act == "gelu") return false;
  require(tanh_forms.count(act) > 0, path, key, act, "gelu, gelu_new, gelu_pytorch_tanh, gelu_fast");
  return true;
}

TransformerConfig shape_of(const json& c, const std::string& path) {
  TransformerConfig cfg;
  cfg.vocab_size = size_key(c, "vocab_size", path);
  cfg.n_layer = size_key(c, "num_hidden_layers", path);
  cfg.n_head = size_key(c, "num_attention_heads", path);
  cfg.n_embd = size_key(c, "hidden_size", path);
  cfg.block_size = size_key(c, "max_position_embeddings", path);
  cfg.mlp.width = size_key(c, "intermediate_size", path);
  require(cfg.n_head > 0 && cfg.n_embd % cfg.n_head == 0, path, "num_attention_heads", cfg.n_head,
          "a divisor of hidden_size");
  return cfg;
}

json id_or_null(int32_t id) { return id >= 0 ? json(id) : json(nullptr); }

}  // namespace spread::arch
