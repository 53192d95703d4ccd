// Hugging Face and sentence-transformers folders as spread models (interchange/hf_import.h). Names and config keys
// come from transformers' modeling_bert.py / configuration_bert.py / modeling_gpt2.py and sentence-transformers'
// models/Pooling.py; what each file holds is checked, not assumed.
#include "spread/interchange/hf_import.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "spread/interchange/hf_layout.h"
#include "spread/model/parameter_count.h"
#include "spread/util/error.h"
#include "spread/util/file.h"
#include "spread/util/json_depth.h"

namespace fs = std::filesystem;

namespace spread {
namespace {

using json = nlohmann::json;

// Limits of this reader (docs/untrusted_input.md). Every file of a folder is a regular file (util/file.h:
// require_regular_file); a JSON file (config.json, modules.json, a module's config, an index of shards) is at most
// this many bytes and nested at most kMaxJsonDepth deep. The largest index of shards of a public model is a few MB.
constexpr uint64_t kMaxJsonFileBytes = uint64_t(64) << 20;

const char* const kSupported =
    "BertModel, BertForMaskedLM, BertForPreTraining, MegatronBertModel, GPT2LMHeadModel, GPT2Model, LlamaForCausalLM, "
    "ModernBertModel, ModernBertForMaskedLM";

std::string path_in(const std::string& dir, const std::string& name) { return (fs::path(dir) / name).string(); }

// A name that one of a folder's files gives for another (a module's path in modules.json, a shard of the index):
// relative and without "..", so that a downloaded folder cannot make spread read outside it (a shard named
// /etc/passwd was read, and its first bytes echoed in the error). Links inside the folder are followed: the Hugging
// Face cache links every file to its blob.
std::string path_inside(const std::string& dir, const std::string& name, const std::string& file,
                        const std::string& key) {
  const fs::path p(name);
  const bool leaves = p.is_absolute() || std::any_of(p.begin(), p.end(), [](const fs::path& s) { return s == ".."; });
  if (leaves)
    throw user_error(file, 0, key, "names '" + name + "', which is outside the folder",
                     "a folder names its own files by paths inside it");
  return path_in(dir, name);
}

json read_json_object(const std::string& path) {
  auto text = read_regular_file(path, kMaxJsonFileBytes);
  if (!text) throw user_error(path, 0, "", "cannot read the file", "give a Hugging Face model folder");
  refuse_deep_json(*text, path);
  auto value = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded() || !value.is_object()) throw user_error(path, 0, "", "is not a JSON object");
  return value;
}

std::optional<json> read_optional_json(const std::string& path) {
  if (!fs::exists(path)) return std::nullopt;
  return read_json_object(path);
}

int64_t int_key(const json& config, const std::string& key, const std::string& path,
                std::optional<int64_t> fallback = std::nullopt) {
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

// A size (a width, a count of layers, heads, positions or tokens): 0 made LibTorch fail mid-run with exit 1.
int64_t size_key(const json& config, const std::string& key, const std::string& path,
                 std::optional<int64_t> fallback = std::nullopt) {
  const int64_t n = int_key(config, key, path, fallback);
  if (n < 1) throw user_error(path, 0, key, "is 0, not a size", "a config.json saved by transformers has it >= 1");
  return n;
}

// A text length of a sentence-transformers or PyLate folder. [CLS] and [SEP] frame every text: below 3 no token of
// the text is left and every text gets the same vector (the recipe's data.max_length has the same rule).
int64_t text_length_key(const json& config, const std::string& key, const std::string& path, int64_t fallback) {
  const int64_t n = size_key(config, key, path, fallback);
  if (n < 3)
    throw user_error(path, 0, key, fmt::format("is {}, which leaves no room for a text token between [CLS] and "
                                               "[SEP]: every text would get the same vector", n),
                     "at least 3");
  return n;
}

// An epsilon or a rotary base: a value <= 0 gave NaN outputs with exit 0.
double positive_key(const json& config, const std::string& key, const std::string& path, double fallback) {
  const double x = float_key(config, key, path, fallback);
  if (!(x > 0) || !std::isfinite(x))
    throw user_error(path, 0, key, "is " + config[key].dump() + ", not a positive number");
  return x;
}

// nlohmann's value() throws a type_error (an abort, not exit 2) when the stored type differs: read typed.
bool bool_key(const json& config, const std::string& key, const std::string& path, bool fallback) {
  if (!config.contains(key) || config[key].is_null()) return fallback;
  if (!config[key].is_boolean()) throw user_error(path, 0, key, "is " + config[key].dump() + ", not true or false");
  return config[key].get<bool>();
}

std::string string_key(const json& config, const std::string& key, const std::string& fallback) {
  return config.contains(key) && config[key].is_string() ? config[key].get<std::string>() : fallback;
}

// A value the loader cannot honour exactly: name it, its value and what is supported.
void require(bool ok, const std::string& path, const std::string& key, const json& value, const std::string& supported) {
  if (!ok)
    throw user_error(path, 0, key, "is " + value.dump() + ", which spread does not implement", "supported: " + supported);
}

// "gelu" is the exact GELU; gelu_new, gelu_pytorch_tanh and gelu_fast are the tanh approximation's implementations
// (they agree to float rounding).
bool tanh_gelu(const std::string& act, const std::string& path, const std::string& key) {
  static const std::set<std::string> tanh_forms = {"gelu_new", "gelu_pytorch_tanh", "gelu_fast"};
  if (act == "gelu") return false;
  require(tanh_forms.count(act) > 0, path, key, act, "gelu, gelu_new, gelu_pytorch_tanh, gelu_fast");
  return true;
}

// --- weights -------------------------------------------------------------------------------------------------

void refuse_lfs_pointer(const std::string& path) {
  require_regular_file(path);  // a FIFO would hang this read (and the safetensors reader takes pipes)
  std::ifstream in(path, std::ios::binary);
  std::string head(64, '\0');
  in.read(head.data(), std::streamsize(head.size()));
  head.resize(size_t(in.gcount()));
  if (head.rfind("version https://git-lfs", 0) == 0)
    throw user_error(path, 0, "", "is a Git LFS pointer, not the weights: the file was never downloaded",
                     "run `git lfs pull` in the model's repository (or download the file) and try again");
}

NamedTensors widened(NamedTensors tensors) {
  for (auto& [name, t] : tensors)
    if (t.is_floating_point() && t.scalar_type() != torch::kFloat) t = t.to(torch::kFloat);
  return tensors;
}

// NaN or infinite weights make every output NaN, which later stages (ward pooling, the metrics) met as an internal
// error or printed as a result: refused here, naming the file and the tensor.
void refuse_non_finite(const NamedTensors& tensors, const std::string& path) {
  for (const auto& [name, t] : tensors)
    if (t.is_floating_point() && !torch::isfinite(t).all().item<bool>())
      throw user_error(path, 0, name, "holds NaN or infinite values", "the file is damaged: download it again");
}

NamedTensors read_weight_file(const std::string& path) {
  refuse_lfs_pointer(path);
  NamedTensors tensors = widened(read_safetensors(path));
  refuse_non_finite(tensors, path);
  return tensors;
}

NamedTensors read_weights(const std::string& dir) {
  const std::string single = path_in(dir, "model.safetensors"), index = path_in(dir, "model.safetensors.index.json");
  if (fs::exists(single)) return read_weight_file(single);
  if (fs::exists(index)) {
    const json map = read_json_object(index);
    if (!map.contains("weight_map") || !map["weight_map"].is_object())
      throw user_error(index, 0, "weight_map", "is missing or not an object");
    std::set<std::string> shards;
    for (const auto& item : map["weight_map"].items()) {
      if (!item.value().is_string()) throw user_error(index, 0, "weight_map." + item.key(), "is not a file name");
      shards.insert(item.value().get<std::string>());
    }
    NamedTensors all;
    for (const auto& shard : shards) {
      const std::string shard_path = path_inside(dir, shard, index, "weight_map");
      if (!fs::exists(shard_path))
        throw user_error(index, 0, "weight_map", "names " + shard + ", which is not in the folder");
      for (auto& [name, t] : read_weight_file(shard_path)) all[name] = t;
    }
    return all;
  }
  if (fs::exists(path_in(dir, "pytorch_model.bin")))
    throw user_error(path_in(dir, "pytorch_model.bin"), 0, "",
                     "is a Python pickle, which spread does not read (only safetensors)",
                     "convert it once with transformers: AutoModel.from_pretrained(DIR).save_pretrained(DIR, "
                     "safe_serialization=True)");
  throw user_error(single, 0, "", "is missing (nor is there model.safetensors.index.json)",
                   "a model folder holds config.json and model.safetensors");
}

// The weights by name with an optional prefix ("bert.", "transformer."), and the old gamma/beta LayerNorm names.
class HfTensors {
 public:
  HfTensors(NamedTensors tensors, std::string source) : tensors_(std::move(tensors)), source_(std::move(source)) {}

  const torch::Tensor* find(const std::string& name) const {
    for (const std::string& candidate : {name, gamma_beta(name)}) {
      auto it = tensors_.find(candidate);
      if (it != tensors_.end()) return &it->second;
    }
    return nullptr;
  }
  const torch::Tensor& get(const std::string& name) const {
    if (const auto* t = find(name)) return *t;
    throw user_error(source_, 0, "", "has no tensor '" + name + "'", "was the folder saved by transformers?");
  }
  bool has_prefix(const std::string& prefix) const {
    auto it = tensors_.lower_bound(prefix);
    return it != tensors_.end() && it->first.rfind(prefix, 0) == 0;
  }
  const std::string& source() const { return source_; }

 private:
  static std::string gamma_beta(const std::string& name) {
    for (const auto& [now, old] : {std::pair<std::string, std::string>{"LayerNorm.weight", "LayerNorm.gamma"},
                                   {"LayerNorm.bias", "LayerNorm.beta"}})
      if (name.size() >= now.size() && name.compare(name.size() - now.size(), now.size(), now) == 0)
        return name.substr(0, name.size() - now.size()) + old;
    return name;
  }
  NamedTensors tensors_;
  std::string source_;
};

// --- BERT ----------------------------------------------------------------------------------------------------

// The shape keys BERT and Llama configs share (transformers' names), with the head count checked.
TransformerConfig shape_of(const json& c, const std::string& path) {
  TransformerConfig cfg;
  cfg.vocab_size = size_key(c, "vocab_size", path);
  cfg.n_layer = size_key(c, "num_hidden_layers", path);
  cfg.n_head = size_key(c, "num_attention_heads", path);
  cfg.n_embd = size_key(c, "hidden_size", path);
  cfg.block_size = size_key(c, "max_position_embeddings", path);
  cfg.intermediate_size = size_key(c, "intermediate_size", path);
  require(cfg.n_head > 0 && cfg.n_embd % cfg.n_head == 0, path, "num_attention_heads", cfg.n_head,
          "a divisor of hidden_size");
  return cfg;
}

TransformerConfig bert_config(const json& c, const std::string& path, bool mlm_head) {
  require(string_key(c, "position_embedding_type", "absolute") == "absolute", path, "position_embedding_type",
          c.contains("position_embedding_type") ? c["position_embedding_type"] : json(), "absolute");
  require(!bool_key(c, "is_decoder", path, false), path, "is_decoder", true, "false (an encoder)");
  require(!bool_key(c, "add_cross_attention", path, false), path, "add_cross_attention", true, "false");
  TransformerConfig cfg = shape_of(c, path);
  cfg.type_vocab_size = int_key(c, "type_vocab_size", path, 2);
  cfg.layer_norm_eps = positive_key(c, "layer_norm_eps", path, 1e-12);
  cfg.gelu_tanh = tanh_gelu(string_key(c, "hidden_act", "gelu"), path, "hidden_act");
  require(cfg.type_vocab_size > 0, path, "type_vocab_size", cfg.type_vocab_size, "at least 1");
  cfg.causal = false;
  cfg.bias = true;
  cfg.post_norm = true;
  cfg.mlm_transform = mlm_head;
  return cfg;
}

void put(NamedTensors& out, const std::string& spread_name, const torch::Tensor& t) { out["model." + spread_name] = t; }

// A tied output matrix saved anyway (`name`, when the file has it) must be the embedding it is tied to.
void require_tied(const HfTensors& hf, const std::string& name, const torch::Tensor& embedding,
                  const std::string& problem, const std::string& fix) {
  const torch::Tensor* decoder = hf.find(name);
  if (decoder && (!decoder->sizes().equals(embedding.sizes()) || !torch::equal(*decoder, embedding)))
    throw user_error(hf.source(), 0, name, problem, fix);
}

void put_linear(NamedTensors& out, const HfTensors& hf, const std::string& from, const std::string& to) {
  put(out, to + ".weight", hf.get(from + ".weight"));
  put(out, to + ".bias", hf.get(from + ".bias"));
}

// The three embeddings, prefixed or not, with "bert." (BertFor*'s and MegatronBertFor*'s base model prefix).
std::string put_bert_embeddings(NamedTensors& out, const HfTensors& hf) {
  const std::string p = hf.has_prefix("bert.") ? "bert." : "";
  put(out, "wte.weight", hf.get(p + "embeddings.word_embeddings.weight"));
  put(out, "wpe.weight", hf.get(p + "embeddings.position_embeddings.weight"));
  put(out, "wtt.weight", hf.get(p + "embeddings.token_type_embeddings.weight"));
  return p;
}

// Layer h's query, key and value as spread's fused projection of block s, whose rows are q | k | v
// (model/attention.cpp's [B, T, 3, H, D] view), and the output projection.
void put_attention(NamedTensors& out, const HfTensors& hf, const std::string& h, const std::string& s) {
  for (const std::string& part : {"weight", "bias"}) {
    std::vector<torch::Tensor> qkv;
    for (const std::string& which : {"query", "key", "value"}) {
      const std::string name = h + "attention.self." + which + "." + part;
      const torch::Tensor& t = hf.get(name);
      if (!qkv.empty() && !t.sizes().equals(qkv[0].sizes()))  // before cat, which would fail without naming it
        throw user_error(hf.source(), 0, name, fmt::format("has shape {} but the query's {} is {}",
                                                           fmt::join(t.sizes().vec(), "x"), part,
                                                           fmt::join(qkv[0].sizes().vec(), "x")),
                         "was the folder saved by transformers with this config.json?");
      qkv.push_back(t);
    }
    put(out, s + "attn.qkv." + part, torch::cat(qkv, 0));
  }
  put_linear(out, hf, h + "attention.output.dense", s + "attn.proj");
}

NamedTensors bert_weights(const HfTensors& hf, const TransformerConfig& cfg) {
  NamedTensors out;
  const std::string p = put_bert_embeddings(out, hf);
  put_linear(out, hf, p + "embeddings.LayerNorm", "emb_norm");
  for (int64_t i = 0; i < cfg.n_layer; ++i) {
    const std::string h = fmt::format("{}encoder.layer.{}.", p, i), s = fmt::format("blocks.{}.", i);
    put_attention(out, hf, h, s);
    put_linear(out, hf, h + "attention.output.LayerNorm", s + "ln1");
    put_linear(out, hf, h + "intermediate.dense", s + "mlp.fc");
    put_linear(out, hf, h + "output.dense", s + "mlp.proj");
    put_linear(out, hf, h + "output.LayerNorm", s + "ln2");
  }
  if (cfg.mlm_transform) {
    put_linear(out, hf, "cls.predictions.transform.dense", "mlm_dense");
    put_linear(out, hf, "cls.predictions.transform.LayerNorm", "mlm_norm");
    const torch::Tensor* bias = hf.find("cls.predictions.bias");
    put(out, "mlm_bias", bias ? *bias : hf.get("cls.predictions.decoder.bias"));
    require_tied(hf, "cls.predictions.decoder.weight", out["model.wte.weight"], "differs from the word embeddings",
                 "spread ties the MLM decoder to the input embedding: only tied models load");
  }
  return out;
}

// --- MegatronBert: the pre-LayerNorm BERT, the layout of spread's own encoders' exports --------------------------

// BERT's keys with the norms before attention and MLP ("attention.ln", "ln") and one after the last layer
// ("encoder.ln"), none after the embeddings.
TransformerConfig megatron_bert_config_of(const json& c, const std::string& path) {
  TransformerConfig cfg = bert_config(c, path, /*mlm_head=*/false);
  cfg.post_norm = false;
  return cfg;
}

NamedTensors megatron_bert_weights(const HfTensors& hf, const TransformerConfig& cfg) {
  NamedTensors out;
  const std::string p = put_bert_embeddings(out, hf);
  for (int64_t i = 0; i < cfg.n_layer; ++i) {
    const std::string h = fmt::format("{}encoder.layer.{}.", p, i), s = fmt::format("blocks.{}.", i);
    put_linear(out, hf, h + "attention.ln", s + "ln1");
    put_attention(out, hf, h, s);
    put_linear(out, hf, h + "ln", s + "ln2");
    put_linear(out, hf, h + "intermediate.dense", s + "mlp.fc");
    put_linear(out, hf, h + "output.dense", s + "mlp.proj");
  }
  put_linear(out, hf, p + "encoder.ln", "ln_f");
  return out;
}

// --- GPT-2 ---------------------------------------------------------------------------------------------------

TransformerConfig gpt2_config_of(const json& c, const std::string& path) {
  require(!bool_key(c, "add_cross_attention", path, false), path, "add_cross_attention", true, "false");
  require(bool_key(c, "scale_attn_weights", path, true), path, "scale_attn_weights", false, "true");
  require(!bool_key(c, "scale_attn_by_inverse_layer_idx", path, false), path, "scale_attn_by_inverse_layer_idx", true, "false");
  TransformerConfig cfg;
  cfg.vocab_size = size_key(c, "vocab_size", path);
  cfg.n_layer = size_key(c, "n_layer", path);
  cfg.n_head = size_key(c, "n_head", path);
  cfg.n_embd = size_key(c, "n_embd", path);
  cfg.block_size = size_key(c, "n_positions", path, size_key(c, "n_ctx", path, 1024));
  cfg.intermediate_size = int_key(c, "n_inner", path, 0);
  cfg.layer_norm_eps = positive_key(c, "layer_norm_epsilon", path, 1e-5);
  cfg.gelu_tanh = tanh_gelu(string_key(c, "activation_function", "gelu_new"), path, "activation_function");
  require(cfg.n_head > 0 && cfg.n_embd % cfg.n_head == 0, path, "n_head", cfg.n_head, "a divisor of n_embd");
  cfg.causal = true;
  cfg.bias = true;
  return cfg;
}

// --- Llama (LlamaForCausalLM: SmolLM, TinyLlama and other Llama-style decoders) -----------------------------

TransformerConfig llama_config_of(const json& c, const std::string& path) {
  if (c.contains("rope_scaling") && !c["rope_scaling"].is_null())
    require(false, path, "rope_scaling", c["rope_scaling"], "null (rotary positions without scaling)");
  const json params = c.contains("rope_parameters") ? c["rope_parameters"] : json();
  if (params.is_object()) {  // transformers 5 keeps the base and the scaling type here
    const std::string type = string_key(params, "rope_type", "default");
    require(type == "default", path, "rope_parameters.rope_type", type, "default");
  }
  const std::string act = string_key(c, "hidden_act", "silu");
  require(act == "silu", path, "hidden_act", act, "silu");
  require(!bool_key(c, "attention_bias", path, false), path, "attention_bias", true, "false");
  require(!bool_key(c, "mlp_bias", path, false), path, "mlp_bias", true, "false");
  TransformerConfig cfg = shape_of(c, path);
  cfg.n_kv_head = int_key(c, "num_key_value_heads", path, cfg.n_head);
  cfg.layer_norm_eps = positive_key(c, "rms_norm_eps", path, 1e-6);
  cfg.rope_theta = positive_key(params.is_object() ? params : c, "rope_theta", path, 10000.0);
  cfg.tie_embeddings = bool_key(c, "tie_word_embeddings", path, false);
  require(cfg.n_kv_head > 0 && cfg.n_head % cfg.n_kv_head == 0, path, "num_key_value_heads", cfg.n_kv_head,
          "a divisor of num_attention_heads");
  const int64_t head_size = int_key(c, "head_dim", path, cfg.n_embd / cfg.n_head);
  require(head_size == cfg.n_embd / cfg.n_head, path, "head_dim", head_size, "hidden_size / num_attention_heads");
  cfg.causal = true;
  cfg.bias = false;
  cfg.norm_bias = false;
  cfg.rms_norm = true;
  cfg.rope = true;
  cfg.gated_mlp = true;
  cfg.silu = true;
  return cfg;
}

NamedTensors llama_weights(const HfTensors& hf, const TransformerConfig& cfg) {
  NamedTensors out;
  for (const auto& t : llama_layout(cfg)) {
    std::vector<torch::Tensor> parts;
    for (const auto& [name, rows] : t.parts) {
      const torch::Tensor& part = hf.get(name);
      if (part.dim() < 1 || part.size(0) != rows)  // before cat, which would fail without naming the tensor
        throw user_error(hf.source(), 0, name, fmt::format("has shape {} but config.json implies {} rows",
                                                           fmt::join(part.sizes().vec(), "x"), rows),
                         "was the folder saved by transformers with this config.json?");
      parts.push_back(part);
    }
    put(out, t.spread, parts.size() == 1 ? parts[0] : torch::cat(parts));
  }
  return out;
}

// --- ModernBERT (ModernBertModel, ModernBertForMaskedLM) -------------------------------------------------------

// The rotary base of one layer type: transformers 5's rope_parameters.<type>.rope_theta, or 4.x's <old_key>.
double modernbert_theta(const json& c, const std::string& path, const std::string& type, const std::string& old_key,
                        double fallback) {
  const json params = c.contains("rope_parameters") && c["rope_parameters"].is_object() ? c["rope_parameters"] : json();
  if (params.contains(type) && params[type].is_object()) {
    const std::string rope_type = string_key(params[type], "rope_type", "default");
    require(rope_type == "default", path, "rope_parameters." + type + ".rope_type", rope_type, "default");
    return positive_key(params[type], "rope_theta", path, positive_key(c, old_key, path, fallback));
  }
  return positive_key(c, old_key, path, fallback);
}

// Local attention on every layer but each global_attn_every_n_layers-th; transformers 5 also writes the pattern out
// as layer_types, which must then be that pattern.
int64_t modernbert_global_every(const json& c, const std::string& path, int64_t n_layer) {
  const int64_t every = int_key(c, "global_attn_every_n_layers", path, 3);
  require(every > 0, path, "global_attn_every_n_layers", every, "a positive integer");
  if (!c.contains("layer_types") || c["layer_types"].is_null()) return every;
  json expected = json::array();
  for (int64_t i = 0; i < n_layer; ++i) expected.push_back(i % every == 0 ? "full_attention" : "sliding_attention");
  require(c["layer_types"] == expected, path, "layer_types", c["layer_types"],
          fmt::format("full_attention on every {}th layer from layer 0, sliding_attention elsewhere ({})", every,
                      expected.dump()));
  return every;
}

TransformerConfig modernbert_config_of(const json& c, const std::string& path, bool mlm_head) {
  if (c.contains("rope_scaling") && !c["rope_scaling"].is_null())
    require(false, path, "rope_scaling", c["rope_scaling"], "null (rotary positions without scaling)");
  const bool attention_bias = bool_key(c, "attention_bias", path, false);
  require(bool_key(c, "mlp_bias", path, false) == attention_bias, path, "mlp_bias", !attention_bias,
          "the same as attention_bias (spread has one bias switch for both)");
  const std::string act = string_key(c, "hidden_activation", "gelu");
  TransformerConfig cfg = shape_of(c, path);
  cfg.gelu_tanh = tanh_gelu(act, path, "hidden_activation");
  if (mlm_head)
    require(string_key(c, "classifier_activation", "gelu") == act, path, "classifier_activation",
            string_key(c, "classifier_activation", "gelu"), "the same as hidden_activation (" + act + ")");
  cfg.layer_norm_eps = positive_key(c, "norm_eps", path, 1e-5);
  cfg.norm_bias = bool_key(c, "norm_bias", path, false);
  cfg.bias = attention_bias;
  cfg.attention_window = int_key(c, "local_attention", path, 128);
  cfg.global_every = modernbert_global_every(c, path, cfg.n_layer);
  cfg.rope_theta = modernbert_theta(c, path, "full_attention", "global_rope_theta", 160000.0);
  cfg.local_rope_theta = modernbert_theta(c, path, "sliding_attention", "local_rope_theta", 10000.0);
  require((cfg.n_embd / cfg.n_head) % 2 == 0, path, "num_attention_heads", cfg.n_head,
          "a head size hidden_size / num_attention_heads that is even (rotary pairs)");
  cfg.causal = false;
  cfg.rope = true;
  cfg.gated_mlp = true;
  cfg.embedding_norm = true;
  cfg.first_block_norm = false;
  cfg.mlm_transform = mlm_head;
  cfg.mlm_dense_bias = bool_key(c, "classifier_bias", path, false);
  cfg.tie_embeddings = bool_key(c, "tie_word_embeddings", path, true);
  return cfg;
}

NamedTensors modernbert_weights(const HfTensors& hf, const TransformerConfig& cfg, bool decoder_bias) {
  NamedTensors out;
  // A ModernBertModel saved from a ModernBertFor* keeps that model's "model." prefix.
  const std::string prefix = !cfg.mlm_transform && hf.has_prefix("model.") ? "model." : "";
  for (const auto& [spread_name, hf_name] : modernbert_layout(cfg)) {
    if (hf_name == "decoder.bias" && !decoder_bias) {  // no bias: zeros do the same
      put(out, spread_name, torch::zeros({cfg.vocab_size}));
      continue;
    }
    put(out, spread_name, hf.get(prefix + hf_name));
  }
  if (cfg.mlm_transform && cfg.tie_embeddings)
    require_tied(hf, "decoder.weight", out["model.wte.weight"],
                 "differs from the token embeddings but the config ties them",
                 "set tie_word_embeddings = false in config.json if the model has an output matrix of its own");
  return out;
}

// --- sentence-transformers -----------------------------------------------------------------------------------

std::string spread_pooling(const json& p, const std::string& path) {
  // The library's flags; exactly one may be set (spread pools one way).
  static const std::vector<std::pair<std::string, std::string>> modes = {
      {"pooling_mode_mean_tokens", "mean"},  {"pooling_mode_cls_token", "cls"},
      {"pooling_mode_max_tokens", "max"},    {"pooling_mode_lasttoken", "last"},
      {"pooling_mode_weightedmean_tokens", "weightedmean"}};
  std::vector<std::string> on;
  for (const auto& [key, name] : modes)
    if (bool_key(p, key, path, false)) on.push_back(name);
  require(!bool_key(p, "pooling_mode_mean_sqrt_len_tokens", path, false), path, "pooling_mode_mean_sqrt_len_tokens", true,
          "mean, cls, max, lasttoken, weightedmean");
  if (on.size() != 1)
    throw user_error(path, 0, "pooling_mode_*", fmt::format("{} modes are set ({})", on.size(), fmt::join(on, ", ")),
                     "spread pools with exactly one of mean, cls, max, lasttoken, weightedmean");
  return on.front();
}

struct StModules {
  SentenceTransformersModules info;
  std::string transformer_path;
  bool pooled = false;
  torch::Tensor head;  // PyLate's Dense modules as one [out, width] matrix (undefined: none)
  std::string lowercase_source;  // the sentence_bert_config.json read, if any
};

// One pylate.models.Dense.Dense module: its linear weight [out, in] (no bias, identity activation, no residual).
torch::Tensor read_dense(const std::string& module_dir) {
  const std::string config = path_in(module_dir, "config.json");
  const json c = read_json_object(config);
  require(!bool_key(c, "bias", config, false), config, "bias", true, "false");
  require(!bool_key(c, "use_residual", config, false), config, "use_residual", true, "false");
  const std::string act = string_key(c, "activation_function", "torch.nn.modules.linear.Identity");
  require(act == "torch.nn.modules.linear.Identity", config, "activation_function", act,
          "torch.nn.modules.linear.Identity");
  const NamedTensors t = read_weights(module_dir);
  auto it = t.find("linear.weight");
  if (it == t.end()) throw user_error(path_in(module_dir, "model.safetensors"), 0, "", "has no tensor 'linear.weight'");
  const int64_t in = size_key(c, "in_features", config), out = size_key(c, "out_features", config);
  if (!it->second.sizes().equals({out, in}))
    throw user_error(path_in(module_dir, "model.safetensors"), 0, "linear.weight",
                     fmt::format("has shape {} but config.json says [{}, {}]", fmt::join(it->second.sizes(), "x"),
                                 out, in));
  return it->second;
}

ColbertModules read_colbert_config(const json& c, const std::string& path) {
  ColbertModules m;
  m.query_prefix = string_key(c, "query_prefix", m.query_prefix);
  m.document_prefix = string_key(c, "document_prefix", m.document_prefix);
  m.query_length = text_length_key(c, "query_length", path, m.query_length);
  m.document_length = text_length_key(c, "document_length", path, m.document_length);
  m.query_expansion = bool_key(c, "do_query_expansion", path, true);
  require(!bool_key(c, "attend_to_expansion_tokens", path, false), path, "attend_to_expansion_tokens", true, "false");
  require(!m.query_prefix.empty() && !m.document_prefix.empty(), path, "query_prefix", m.query_prefix,
          "non-empty query and document prefixes");
  if (c.contains("skiplist_words") && c["skiplist_words"].is_array())
    for (const auto& w : c["skiplist_words"])
      if (w.is_string()) m.skiplist_words.push_back(w.get<std::string>());
  return m;
}

// A model is built from config.json's sizes before the weights are copied in, so sizes that the weights do not
// hold (a vocab_size or max_position_embeddings of 1e9) would reach the allocator first: refused here, by name.
void refuse_sizes_beyond_weights(const HfModelFolder& folder, const std::string& config_path) {
  double held = 0;
  for (const auto& [name, tensor] : folder.weights) held += double(tensor.numel());
  const TransformerConfig& c = folder.config;
  const double needed = parameter_count(c);
  if (needed <= held) return;
  throw user_error(config_path, 0, "",
                   fmt::format("its sizes (vocabulary {}, width {}, {} layers, {} positions, MLP width {}) make a "
                               "model of {:.0f} values, but the weights hold {:.0f}", c.vocab_size, c.n_embd,
                               c.n_layer, c.block_size, c.intermediate_size, needed, held),
                   "this config.json does not belong to the weights beside it");
}

StModules read_sentence_modules(const std::string& dir) {
  const std::string path = path_in(dir, "modules.json");
  auto text = read_regular_file(path, kMaxJsonFileBytes);
  if (!text) throw user_error(path, 0, "", "cannot read the file");
  refuse_deep_json(*text, path);
  const json modules = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!modules.is_array()) throw user_error(path, 0, "", "is not a JSON array of modules");
  StModules out;
  bool have_transformer = false;
  for (const auto& m : modules) {
    const std::string type = m.is_object() ? string_key(m, "type", "") : "";
    const std::string sub = m.is_object() ? string_key(m, "path", "") : "";
    const std::string module_dir = path_inside(dir, sub, path, "path");
    if (type == "sentence_transformers.models.Transformer") {
      have_transformer = true;
      out.transformer_path = module_dir;
    } else if (type == "pylate.models.Dense.Dense") {
      // Two linear maps without bias or activation are one: the product of their matrices.
      const torch::Tensor w = read_dense(module_dir);
      if (out.head.defined() && w.size(1) != out.head.size(0))
        throw user_error(path_in(module_dir, "config.json"), 0, "in_features",
                         fmt::format("is {} but the module before gives {}", w.size(1), out.head.size(0)));
      out.head = out.head.defined() ? torch::matmul(w.to(torch::kDouble), out.head.to(torch::kDouble)).to(torch::kFloat)
                                    : w;
    } else if (type == "sentence_transformers.models.Pooling") {
      out.pooled = true;
      const std::string config = path_in(module_dir, "config.json");
      const json p = read_json_object(config);
      out.info.pooling = spread_pooling(p, config);
      out.info.include_prompt = bool_key(p, "include_prompt", config, true);
    } else if (type == "sentence_transformers.models.Normalize") {
      out.info.normalize = true;
    } else {
      throw user_error(path, 0, "type", "module '" + type + "' is not supported",
                       "spread reads Transformer, Pooling, Normalize and PyLate's Dense modules");
    }
  }
  if (!have_transformer) throw user_error(path, 0, "", "has no sentence_transformers.models.Transformer module");
  // Its settings: sentence_bert_config.json beside the weights (or at the top, in older folders).
  for (const std::string& where : {out.transformer_path, dir}) {
    if (auto c = read_optional_json(path_in(where, "sentence_bert_config.json"))) {
      const std::string sbert = path_in(where, "sentence_bert_config.json");
      const bool given = c->contains("max_seq_length") && !(*c)["max_seq_length"].is_null();
      out.info.max_seq_length = given ? text_length_key(*c, "max_seq_length", sbert, 0) : 0;  // 0: the model's
      out.info.lowercase = bool_key(*c, "do_lower_case", sbert, false);
      out.lowercase_source = sbert;
      break;
    }
  }
  if (auto c = read_optional_json(path_in(dir, "config_sentence_transformers.json"))) {
    if (c->contains("prompts") && (*c)["prompts"].is_object())
      for (const auto& item : (*c)["prompts"].items())
        if (item.value().is_string()) out.info.prompts[item.key()] = item.value().get<std::string>();
    out.info.default_prompt_name = string_key(*c, "default_prompt_name", "");
  }
  return out;
}

}  // namespace

HfModelFolder read_hf_model_folder(const std::string& dir, bool with_weights) {
  if (!fs::is_directory(dir)) throw user_error(dir, 0, "", "is not a folder", "give a Hugging Face model folder");
  HfModelFolder folder;
  folder.dir = dir;
  folder.model_dir = dir;
  torch::Tensor head;
  if (fs::exists(path_in(dir, "modules.json"))) {
    StModules st = read_sentence_modules(dir);
    folder.model_dir = st.transformer_path;
    const std::string st_config = path_in(dir, "config_sentence_transformers.json");
    auto c = read_optional_json(st_config);
    if (c && string_key(*c, "model_type", "") == "ColBERT") {
      if (!st.head.defined() || st.pooled)
        throw user_error(path_in(dir, "modules.json"), 0, "", "a ColBERT folder needs Dense modules and no Pooling");
      // PyLate inserts its prefixes into the tokenized text; lower-casing the text around them is not modelled.
      require(!st.info.lowercase, st.lowercase_source, "do_lower_case", true, "false in a ColBERT folder");
      folder.colbert = read_colbert_config(*c, st_config);
      head = st.head;
    } else {
      if (st.head.defined())
        throw user_error(path_in(dir, "modules.json"), 0, "", "has Dense modules but is no ColBERT folder",
                         "config_sentence_transformers.json's model_type is \"ColBERT\" in PyLate's folders");
      folder.sentence = st.info;
    }
  }
  const std::string config_path = path_in(folder.model_dir, "config.json");
  if (!fs::exists(config_path))
    throw user_error(config_path, 0, "", "is missing", "a Hugging Face model folder holds config.json and the weights");
  const json c = read_json_object(config_path);
  const json archs = c.contains("architectures") ? c["architectures"] : json::array();
  folder.architecture = archs.is_array() && !archs.empty() && archs[0].is_string() ? archs[0].get<std::string>()
                                                                                  : string_key(c, "model_type", "");
  const std::string a = folder.architecture;
  const bool megatron = a == "MegatronBertModel" || a == "megatron-bert";
  const bool bert = megatron || a == "BertModel" || a == "BertForMaskedLM" || a == "BertForPreTraining" || a == "bert";
  const bool gpt2 = a == "GPT2LMHeadModel" || a == "GPT2Model" || a == "gpt2";
  const bool llama = a == "LlamaForCausalLM" || a == "llama";
  const bool modernbert = a == "ModernBertModel" || a == "ModernBertForMaskedLM" || a == "modernbert";
  if (!bert && !gpt2 && !llama && !modernbert)
    throw user_error(config_path, 0, "architectures", "is " + (a.empty() ? std::string("missing") : a),
                     std::string("supported: ") + kSupported);
  // BertModel has no MLM head; the other two architectures keep one (BertForPreTraining's beside the NSP head).
  const bool mlm = bert && !megatron && a != "BertModel" && a != "bert";
  folder.family = bert ? "bert" : gpt2 ? "gpt2" : llama ? "llama" : "modernbert";
  folder.config = megatron     ? megatron_bert_config_of(c, config_path)
                  : bert       ? bert_config(c, config_path, mlm)
                  : gpt2       ? gpt2_config_of(c, config_path)
                  : modernbert ? modernbert_config_of(c, config_path, a == "ModernBertForMaskedLM")
                               : llama_config_of(c, config_path);
  if (head.defined()) {
    if (head.size(1) != folder.config.n_embd)
      throw user_error(path_in(dir, "1_Dense/config.json"), 0, "in_features",
                       fmt::format("is {} but the encoder is {} wide", head.size(1), folder.config.n_embd));
    folder.config.head_dim = head.size(0);
  }
  // Checked here for every command, as train's recipe check does: eval and calibrate failed mid-run with exit 1.
  if (folder.colbert)
    for (const auto& [key, length] : {std::pair{"query_length", folder.colbert->query_length},
                                      std::pair{"document_length", folder.colbert->document_length}})
      if (length > folder.config.block_size)
        throw user_error(path_in(dir, "config_sentence_transformers.json"), 0, key,
                         fmt::format("is {}, longer than the model's {} positions", length, folder.config.block_size),
                         "lower it to at most " + std::to_string(folder.config.block_size));
  if (with_weights) {
    NamedTensors raw = read_weights(folder.model_dir);
    folder.weights = megatron ? megatron_bert_weights(HfTensors(std::move(raw), config_path), folder.config)
                     : bert   ? bert_weights(HfTensors(std::move(raw), config_path), folder.config)
                     : gpt2   ? spread_tensors_from_gpt2(raw, folder.config, config_path)
                     : modernbert
                         ? modernbert_weights(HfTensors(std::move(raw), config_path), folder.config,
                                              bool_key(c, "decoder_bias", config_path, true))
                         : llama_weights(HfTensors(std::move(raw), config_path), folder.config);
    if (head.defined()) folder.weights["model.head.weight"] = head;
    refuse_sizes_beyond_weights(folder, config_path);
  }
  if ((folder.sentence || folder.colbert) && folder.family != "bert" && folder.family != "modernbert")
    throw user_error(path_in(dir, "modules.json"), 0, "", "wraps a " + a + "; spread reads sentence-transformers "
                     "folders around BERT-family and ModernBERT encoders", std::string("supported: ") + kSupported);
  return folder;
}

Recipe recipe_of_model_folder(const HfModelFolder& folder) {
  Recipe r;
  r.source = path_in(folder.model_dir, "config.json");
  const TransformerConfig& c = folder.config;
  r.model.n_layer = c.n_layer;
  r.model.n_head = c.n_head;
  r.model.n_embd = c.n_embd;
  r.model.block_size = c.block_size;
  r.model.bias = c.bias;
  r.model.causal = c.causal;
  r.model.norm_position = c.post_norm ? "post" : "pre";
  r.model.activation = c.gelu_tanh ? "gelu_tanh" : "gelu";
  r.model.intermediate_size = c.intermediate_size;
  r.model.layer_norm_eps = c.layer_norm_eps;
  r.model.type_vocab_size = c.type_vocab_size;
  r.model.mlm_transform = c.mlm_transform;
  r.model.vocab_size = c.vocab_size;
  r.model.positions = c.rope ? "rope" : "learned";
  r.model.rope_theta = c.rope_theta;
  r.model.norm = c.rms_norm ? "rmsnorm" : "layernorm";
  r.model.norm_bias = c.norm_bias;
  r.model.mlp = !c.gated_mlp ? "gelu" : c.silu ? "swiglu" : "geglu";
  r.model.n_kv_head = c.n_kv_head;
  r.model.tie_embeddings = c.tie_embeddings;
  r.model.attention_window = c.attention_window;
  r.model.global_every = c.global_every;
  r.model.local_rope_theta = c.local_rope_theta;
  r.model.embedding_norm = c.embedding_norm;
  r.model.first_block_norm = c.first_block_norm;
  r.model.mlm_dense_bias = c.mlm_dense_bias;
  r.model.dropout = 0.0;
  r.tokenizer.kind = "hf";
  // The tokenizer files sit beside the weights, or at the top of a sentence-transformers folder.
  const bool beside = fs::exists(path_in(folder.model_dir, "tokenizer.json")) ||
                      fs::exists(path_in(folder.model_dir, "vocab.txt")) ||
                      fs::exists(path_in(folder.model_dir, "vocab.json"));
  r.tokenizer.path = beside ? folder.model_dir : folder.dir;
  r.train.objective = c.causal ? Objective::lm : c.mlm_transform ? Objective::mlm : Objective::contrastive;
  r.data.max_length = c.block_size;
  if (folder.colbert) {
    const ColbertModules& m = *folder.colbert;
    r.train.objective = Objective::maxsim;
    r.model.head_dim = c.head_dim;
    r.loss.maxsim.query_length = m.query_length;
    r.loss.maxsim.document_length = m.document_length;
    r.loss.maxsim.query_expansion = m.query_expansion;
    r.loss.maxsim.skiplist = !m.skiplist_words.empty();
    r.loss.maxsim.skiplist_words = m.skiplist_words;
    r.tokenizer.query_marker = m.query_prefix;
    r.tokenizer.document_marker = m.document_prefix;
  }
  if (folder.sentence) {
    r.loss.contrastive.pooling = folder.sentence->pooling;
    if (folder.sentence->max_seq_length > 0)
      r.data.max_length = std::min(folder.sentence->max_seq_length, c.block_size);
    r.tokenizer.lowercase = folder.sentence->lowercase;
  }
  return r;
}

}  // namespace spread
