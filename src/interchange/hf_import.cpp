// Hugging Face and sentence-transformers folders as spread models (interchange/hf_import.h): the folder's files, the
// weights, the sentence-transformers and PyLate modules (sentence-transformers' models/Pooling.py, Dense.py); the
// architecture itself is read by its file in interchange/arch/ (interchange/architecture.h). What each file holds is
// checked, not assumed.
#include "spread/interchange/hf_import.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "spread/interchange/architecture.h"
#include "spread/model/parameter_count.h"
#include "spread/util/error.h"
#include "spread/util/file.h"
#include "spread/util/json_text.h"

#include "arch/config_keys.h"
#include "arch/tensor_maps.h"

namespace fs = std::filesystem;

namespace spread {
namespace {

using json = nlohmann::json;
using arch::bool_key;
using arch::int_key;
using arch::require;
using arch::size_key;
using arch::string_key;

// Limits of this reader (docs/untrusted_input.md). Every file of a folder is a regular file (util/file.h:
// require_regular_file); a JSON file (config.json, modules.json, a module's config, an index of shards) is at most
// this many bytes and nested at most kMaxJsonDepth deep. The largest index of shards of a public model is a few MB.
constexpr uint64_t kMaxJsonFileBytes = uint64_t(64) << 20;

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
  const json value = parse_json_text(*text, path);
  if (!value.is_object()) throw user_error(path, 0, "", "is not a JSON object");
  return value;
}

std::optional<json> read_optional_json(const std::string& path) {
  if (!fs::exists(path)) return std::nullopt;
  return read_json_object(path);
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

// --- sentence-transformers -----------------------------------------------------------------------------------

// sentence-transformers 6 writes one "pooling_mode" (a name, or a list of them for concatenated poolings).
std::string spread_pooling_mode(const json& mode, const std::string& path) {
  static const std::map<std::string, std::string> names = {
      {"mean", "mean"}, {"cls", "cls"}, {"max", "max"}, {"lasttoken", "last"}, {"weightedmean", "weightedmean"}};
  const json& one = mode.is_array() && mode.size() == 1 ? mode[0] : mode;
  const auto it = one.is_string() ? names.find(one.get<std::string>()) : names.end();
  if (it == names.end())
    throw user_error(path, 0, "pooling_mode", "is " + mode.dump() + ", which spread does not implement",
                     "spread pools with exactly one of mean, cls, max, lasttoken, weightedmean");
  return it->second;
}

std::string spread_pooling(const json& p, const std::string& path) {
  if (p.contains("pooling_mode")) return spread_pooling_mode(p["pooling_mode"], path);
  // sentence-transformers 5's flags; exactly one may be set (spread pools one way).
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
  const std::string act = string_key(c, "activation_function", config, "torch.nn.modules.linear.Identity");
  require(act == "torch.nn.modules.linear.Identity", config, "activation_function", act,
          "torch.nn.modules.linear.Identity");
  const NamedTensors t = read_weights(module_dir);
  auto it = t.find("linear.weight");
  if (it == t.end()) throw user_error(path_in(module_dir, "model.safetensors"), 0, "", "has no tensor 'linear.weight'");
  arch::float_weight(it->second, path_in(module_dir, "model.safetensors"), "linear.weight");
  const int64_t in = size_key(c, "in_features", config), out = size_key(c, "out_features", config);
  if (!it->second.sizes().equals({out, in}))
    throw user_error(path_in(module_dir, "model.safetensors"), 0, "linear.weight",
                     fmt::format("has shape {} but config.json says [{}, {}]", fmt::join(it->second.sizes(), "x"),
                                 out, in));
  return it->second;
}

// The head so far followed by a Dense of weight `w` [out, in] from `module_dir`: two linear maps without bias or
// activation are one, the product of their matrices (undefined `head`: `w` is the first).
torch::Tensor then_dense(const torch::Tensor& head, const torch::Tensor& w, const std::string& module_dir) {
  if (!head.defined()) return w;
  if (w.size(1) != head.size(0))
    throw user_error(path_in(module_dir, "config.json"), 0, "in_features",
                     fmt::format("is {} but the module before gives {}", w.size(1), head.size(0)));
  return torch::matmul(w.to(torch::kDouble), head.to(torch::kDouble)).to(torch::kFloat);
}

ColbertModules read_colbert_config(const json& c, const std::string& path) {
  ColbertModules m;
  m.query_prefix = string_key(c, "query_prefix", path, m.query_prefix);
  m.document_prefix = string_key(c, "document_prefix", path, m.document_prefix);
  m.query_length = text_length_key(c, "query_length", path, m.query_length);
  m.document_length = text_length_key(c, "document_length", path, m.document_length);
  m.query_expansion = bool_key(c, "do_query_expansion", path, true);
  require(!bool_key(c, "attend_to_expansion_tokens", path, false), path, "attend_to_expansion_tokens", true, "false");
  require(!m.query_prefix.empty() && !m.document_prefix.empty(), path, "query_prefix", m.query_prefix,
          "non-empty query and document prefixes");
  if (c.contains("skiplist_words") && c["skiplist_words"].is_array()) {
    m.skiplist_words.clear();
    for (const auto& w : c["skiplist_words"])
      if (w.is_string()) m.skiplist_words.push_back(w.get<std::string>());
  }
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
                               "model of {:.0f} values, but the weights hold {:.0f}",
                               c.vocab_size, c.n_embd, c.n_layer, c.block_size, c.mlp.width, needed, held),
                   "this config.json does not belong to the weights beside it");
}

// Module types by what spread does with them: sentence-transformers 5's names (sentence_transformers.models.*) and
// 6's (its modules moved to sentence_transformers.base.modules and .sentence_transformer.modules; 6 still loads
// the old names, and writes the new ones).
enum class ModuleKind { transformer, pooling, normalize, pylate_dense, st_dense, multi_vector_mask, other };

ModuleKind module_kind(const std::string& type) {
  static const std::map<std::string, ModuleKind> kinds = {
      {"sentence_transformers.models.Transformer", ModuleKind::transformer},
      {"sentence_transformers.base.modules.transformer.Transformer", ModuleKind::transformer},
      {"sentence_transformers.models.Pooling", ModuleKind::pooling},
      {"sentence_transformers.sentence_transformer.modules.pooling.Pooling", ModuleKind::pooling},
      {"sentence_transformers.models.Normalize", ModuleKind::normalize},
      {"sentence_transformers.base.modules.normalize.Normalize", ModuleKind::normalize},
      {"pylate.models.Dense.Dense", ModuleKind::pylate_dense},
      {"sentence_transformers.base.modules.dense.Dense", ModuleKind::st_dense},
      {"sentence_transformers.multi_vector_encoder.modules.multi_vector_mask.MultiVectorMask",
       ModuleKind::multi_vector_mask}};
  const auto it = kinds.find(type);
  return it == kinds.end() ? ModuleKind::other : it->second;
}

// The tokenizer's model_max_length (tokenizer_config.json beside the weights, else at the top): what both library
// versions cap max_seq_length with when the folder names none. 0 when absent or transformers' "no limit" (1e30).
int64_t tokenizer_max_length(const std::string& transformer_dir, const std::string& dir) {
  for (const std::string& where : {transformer_dir, dir})
    if (auto c = read_optional_json(path_in(where, "tokenizer_config.json"))) {
      const json& n = c->contains("model_max_length") ? (*c)["model_max_length"] : json();
      const bool limit = n.is_number_unsigned() && n.get<uint64_t>() <= (uint64_t(1) << 31);
      return limit ? text_length_key(*c, "model_max_length", path_in(where, "tokenizer_config.json"), 0) : 0;
    }
  return 0;
}

// `st_config`: config_sentence_transformers.json, read once by the caller (nullopt when the folder has none).
StModules read_sentence_modules(const std::string& dir, const std::optional<json>& st_config) {
  const std::string path = path_in(dir, "modules.json");
  auto text = read_regular_file(path, kMaxJsonFileBytes);
  if (!text) throw user_error(path, 0, "", "cannot read the file");
  const json modules = parse_json_text(*text, path);
  if (!modules.is_array()) throw user_error(path, 0, "", "is not a JSON array of modules");
  StModules out;
  bool have_transformer = false;
  for (const auto& m : modules) {
    const std::string type = m.is_object() ? string_key(m, "type", path, "") : "";
    const std::string sub = m.is_object() ? string_key(m, "path", path, "") : "";
    const std::string module_dir = path_inside(dir, sub, path, "path");
    const ModuleKind kind = module_kind(type);
    if (kind == ModuleKind::transformer) {
      have_transformer = true;
      out.transformer_path = module_dir;
    } else if (kind == ModuleKind::pylate_dense) {
      out.head = then_dense(out.head, read_dense(module_dir), module_dir);
    } else if (kind == ModuleKind::pooling) {
      out.pooled = true;
      const std::string config = path_in(module_dir, "config.json");
      const json p = read_json_object(config);
      out.info.pooling = spread_pooling(p, config);
      out.info.include_prompt = bool_key(p, "include_prompt", config, true);
    } else if (kind == ModuleKind::normalize) {
      out.info.normalize = true;
    } else {
      throw user_error(path, 0, "type", "module '" + type + "' is not supported",
                       "spread reads the Transformer, Pooling and Normalize modules of sentence-transformers 5 and "
                       "6, and PyLate's Dense modules");
    }
  }
  if (!have_transformer) throw user_error(path, 0, "", "has no sentence-transformers Transformer module");
  // Its settings: sentence_bert_config.json beside the weights (or at the top, in older folders). Version 6 writes
  // neither key there: its max_seq_length is the tokenizer's model_max_length, and do_lower_case a Lowercase step
  // in tokenizer.json's normalizer.
  bool length_given = false;
  for (const std::string& where : {out.transformer_path, dir}) {
    if (auto c = read_optional_json(path_in(where, "sentence_bert_config.json"))) {
      const std::string sbert = path_in(where, "sentence_bert_config.json");
      length_given = c->contains("max_seq_length") && !(*c)["max_seq_length"].is_null();
      if (length_given) out.info.max_seq_length = text_length_key(*c, "max_seq_length", sbert, 0);
      out.info.lowercase = bool_key(*c, "do_lower_case", sbert, false);
      out.lowercase_source = sbert;
      break;
    }
  }
  // Without one, the libraries take min(model_max_length, positions); the positions' cap is applied with the model.
  if (!length_given) out.info.max_seq_length = tokenizer_max_length(out.transformer_path, dir);
  if (const auto& c = st_config) {
    if (c->contains("prompts") && (*c)["prompts"].is_object())
      for (const auto& item : (*c)["prompts"].items())
        if (item.value().is_string()) out.info.prompts[item.key()] = item.value().get<std::string>();
    out.info.default_prompt_name =
        string_key(*c, "default_prompt_name", path_in(dir, "config_sentence_transformers.json"), "");
  }
  return out;
}

// --- sentence-transformers 6 MultiVectorEncoder ----------------------------------------------------------------
// Read as spread's maxsim model where version 6.3 encodes exactly as it does: it prepends the prompt ("[Q] ") to
// the text and tokenizes the whole with max_length the query expansion's length (queries) or document_length, so
// when the prompt is one unnormalised added token the ids are [CLS] marker tokens... [SEP], truncated to the same
// length the marker included, as PyLate's insertion after [CLS] gives; queries are then padded with [MASK] left out
// of attention and scored (MultiVectorMask), documents lose the skiplist's tokens, and the vectors are normalised.

struct MultiVectorFolder {
  ColbertModules modules;
  torch::Tensor head;
  std::string transformer_path;
};

// A version 6 Dense as read_dense reads PyLate's, with version 6's defaults (bias, Tanh) and on the token vectors.
torch::Tensor read_st6_dense(const std::string& module_dir) {
  const std::string config = path_in(module_dir, "config.json");
  const json c = read_json_object(config);
  require(!bool_key(c, "bias", config, true), config, "bias", true, "false");
  const std::string act = string_key(c, "activation_function", config, "torch.nn.modules.activation.Tanh");
  require(act == "torch.nn.modules.linear.Identity", config, "activation_function", act,
          "torch.nn.modules.linear.Identity");
  for (const auto& [key, fallback] : {std::pair{"module_input_name", "sentence_embedding"},
                                      std::pair{"module_output_name", "token_embeddings"}}) {
    const std::string name = string_key(c, key, config, fallback);
    require(name == "token_embeddings", config, key, name, "token_embeddings (a map of each token's vector)");
  }
  return read_dense(module_dir);
}

// The modules spread computes: Transformer, Dense (one or more), MultiVectorMask, Normalize, in that order.
std::vector<std::string> multi_vector_module_dirs(const std::string& dir) {
  const std::string path = path_in(dir, "modules.json");
  auto text = read_regular_file(path, kMaxJsonFileBytes);
  if (!text) throw user_error(path, 0, "", "cannot read the file");
  const json modules = parse_json_text(*text, path);
  std::vector<ModuleKind> kinds;
  std::vector<std::string> dirs, types;
  for (const auto& m : modules.is_array() ? modules : json::array()) {
    types.push_back(m.is_object() ? string_key(m, "type", path, "") : "");
    kinds.push_back(module_kind(types.back()));
    dirs.push_back(path_inside(dir, m.is_object() ? string_key(m, "path", path, "") : "", path, "path"));
  }
  bool ok = kinds.size() >= 4 && kinds.front() == ModuleKind::transformer &&
            kinds[kinds.size() - 2] == ModuleKind::multi_vector_mask && kinds.back() == ModuleKind::normalize;
  for (size_t i = 1; ok && i + 2 < kinds.size(); ++i) ok = kinds[i] == ModuleKind::st_dense;
  if (!ok)
    throw user_error(path, 0, "type", fmt::format("lists [{}]", fmt::join(types, ", ")),
                     "spread reads a MultiVectorEncoder of Transformer, Dense, MultiVectorMask and Normalize modules "
                     "(its maxsim model); other modules change what it computes");
  return dirs;
}

// Query expansion and lengths, from the Transformer's sentence_bert_config.json.
void read_multi_vector_transformer(const std::string& where, const std::string& dir, ColbertModules& m) {
  const std::string path = path_in(where, "sentence_bert_config.json");
  const json c = read_json_object(path);
  const std::string task = string_key(c, "transformer_task", path, "feature-extraction");
  require(task == "feature-extraction", path, "transformer_task", task, "feature-extraction");
  const bool kwargs = c.contains("processing_kwargs") && !c["processing_kwargs"].is_null() &&
                      !c["processing_kwargs"].empty();
  require(!kwargs, path, "processing_kwargs", kwargs ? c["processing_kwargs"] : json(), "none");
  const json e = c.contains("query_expansion") ? c["query_expansion"] : json();
  require(e.is_object(), path, "query_expansion", e, R"({"strategy": "fixed", "attend": false, "length": N})");
  const std::string strategy = string_key(e, "strategy", path, "");
  require(strategy == "fixed", path, "query_expansion.strategy", strategy, "fixed (queries padded to one length)");
  require(!bool_key(e, "attend", path, false), path, "query_expansion.attend", true,
          "false (the [MASK] expansion left out of attention, as PyLate)");
  const std::string token = string_key(e, "token", path, "[MASK]");
  require(token == "[MASK]", path, "query_expansion.token", token, "[MASK] (or null)");
  m.query_expansion = true;
  m.query_length = text_length_key(e, "length", path, 0);
  require(m.query_length > 0, path, "query_expansion.length", m.query_length, "a positive length");
  // Fixed expansion tokenizes queries at its length; a larger query_length is ignored, a smaller one refused there.
  const int64_t query_length = text_length_key(c, "query_length", path, m.query_length);
  require(query_length >= m.query_length, path, "query_length", query_length, "at least query_expansion.length");
  // Without document_length documents are cut at the tokenizer's model_max_length.
  m.document_length = text_length_key(c, "document_length", path, tokenizer_max_length(where, dir));
  require(m.document_length > 0, path, "document_length", nullptr, "a document length (or a tokenizer limit)");
}

// tokenizer.json beside the weights, else at the top: the prompts must be its unnormalised added tokens, and the
// skiplist is the words it holds (version 6 drops the others; PyLate's rule would skip [UNK]).
json multi_vector_tokenizer(const std::string& where, const std::string& dir) {
  for (const std::string& at : {where, dir})
    if (fs::exists(path_in(at, "tokenizer.json"))) return read_json_object(path_in(at, "tokenizer.json"));
  throw user_error(path_in(dir, "tokenizer.json"), 0, "", "is missing",
                   "a MultiVectorEncoder folder holds its tokenizer's tokenizer.json");
}

std::string multi_vector_prompt(const json& st, const std::string& st_path, const json& tokenizer,
                                const std::string& task) {
  const json prompts = st.contains("prompts") && st["prompts"].is_object() ? st["prompts"] : json::object();
  const std::string prompt = string_key(prompts, task, st_path, "");
  bool single = false;
  if (tokenizer.contains("added_tokens") && tokenizer["added_tokens"].is_array())
    for (const auto& t : tokenizer["added_tokens"])
      single |= t.is_object() && t.value("content", json()) == prompt && t.value("normalized", json(true)) == false;
  require(single, st_path, "prompts." + task, prompt,
          "one unnormalised added token of the folder's tokenizer, such as PyLate's \"[Q] \" and \"[D] \" "
          "(then prepending it is inserting its id after [CLS], as spread does)");
  return prompt;
}

std::vector<std::string> multi_vector_skiplist(const std::string& mask_dir, const json& tokenizer) {
  const std::string path = path_in(mask_dir, "config.json");
  const json c = read_json_object(path);
  json tasks = c.contains("skiplist_tasks") && !c["skiplist_tasks"].is_null() ? c["skiplist_tasks"] : json("document");
  if (tasks.is_string()) tasks = json::array({tasks});
  require(tasks == json::array({"document"}), path, "skiplist_tasks", tasks, "[\"document\"] (PyLate's)");
  const bool keep = c.contains("keep_only_token_ids") && !c["keep_only_token_ids"].is_null() &&
                    !c["keep_only_token_ids"].empty();
  require(!keep, path, "keep_only_token_ids", keep ? c["keep_only_token_ids"] : json(), "null");
  std::set<std::string> known;
  const json& model = tokenizer.contains("model") ? tokenizer["model"] : json();
  if (model.is_object() && model.contains("vocab") && model["vocab"].is_object())
    for (const auto& item : model["vocab"].items()) known.insert(item.key());
  if (tokenizer.contains("added_tokens") && tokenizer["added_tokens"].is_array())
    for (const auto& t : tokenizer["added_tokens"])
      if (t.is_object() && t.value("content", json()).is_string()) known.insert(t["content"].get<std::string>());
  std::vector<std::string> words;
  if (c.contains("skiplist_words") && c["skiplist_words"].is_array())
    for (const auto& w : c["skiplist_words"])
      if (w.is_string() && known.count(w.get<std::string>())) words.push_back(w.get<std::string>());
  return words;
}

MultiVectorFolder read_multi_vector_folder(const std::string& dir, const json& st, const std::string& st_path) {
  const std::string similarity = string_key(st, "similarity_fn_name", st_path, "maxsim");
  require(similarity == "maxsim", st_path, "similarity_fn_name", similarity, "maxsim");
  const std::vector<std::string> dirs = multi_vector_module_dirs(dir);
  MultiVectorFolder out;
  out.transformer_path = dirs.front();
  read_multi_vector_transformer(out.transformer_path, dir, out.modules);
  const json tokenizer = multi_vector_tokenizer(out.transformer_path, dir);
  out.modules.query_prefix = multi_vector_prompt(st, st_path, tokenizer, "query");
  out.modules.document_prefix = multi_vector_prompt(st, st_path, tokenizer, "document");
  for (size_t i = 1; i + 2 < dirs.size(); ++i) out.head = then_dense(out.head, read_st6_dense(dirs[i]), dirs[i]);
  const std::string norm = path_in(dirs.back(), "config.json");
  const json n = fs::exists(norm) ? read_json_object(norm) : json::object();
  const std::string input = string_key(n, "module_input_name", norm, "sentence_embedding");
  require(input == "token_embeddings", norm, "module_input_name", input, "token_embeddings");
  out.modules.skiplist_words = multi_vector_skiplist(dirs[dirs.size() - 2], tokenizer);
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
    const std::string st_config = path_in(dir, "config_sentence_transformers.json");
    const std::optional<json> c = read_optional_json(st_config);
    const std::string model_type = c ? string_key(*c, "model_type", st_config, "") : "";
    if (model_type == "MultiVectorEncoder") {
      MultiVectorFolder mv = read_multi_vector_folder(dir, *c, st_config);
      folder.model_dir = mv.transformer_path;
      folder.colbert = mv.modules;
      head = mv.head;
    } else {
      StModules st = read_sentence_modules(dir, c);
      folder.model_dir = st.transformer_path;
      // PyLate takes a folder without a model_type for its own ("ColBERT", its _get_model_type), and saves one so
      // when the model it trained was made from a plain encoder; its Dense modules say whose it is.
      if (model_type == "ColBERT" || (model_type.empty() && st.head.defined())) {
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
  }
  const std::string config_path = path_in(folder.model_dir, "config.json");
  if (!fs::exists(config_path))
    throw user_error(config_path, 0, "", "is missing", "a Hugging Face model folder holds config.json and the weights");
  const json c = read_json_object(config_path);
  const json archs = c.contains("architectures") ? c["architectures"] : json::array();
  folder.architecture = archs.is_array() && !archs.empty() && archs[0].is_string() ? archs[0].get<std::string>()
                                                                                  : string_key(c, "model_type", config_path, "");
  const Architecture* architecture = architecture_named(folder.architecture);
  if (!architecture)
    throw user_error(config_path, 0, "architectures",
                     "is " + (folder.architecture.empty() ? std::string("missing") : folder.architecture),
                     "supported: " + supported_architectures());
  folder.family = architecture->family;
  folder.config = architecture->read_config(c, config_path, folder.architecture);
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
    folder.weights = architecture->read_weights(read_weights(folder.model_dir), folder.config, c, config_path);
    if (head.defined()) folder.weights["model.head.weight"] = head;
    refuse_sizes_beyond_weights(folder, config_path);
  }
  if ((folder.sentence || folder.colbert) && !architecture->encoder)
    throw user_error(path_in(dir, "modules.json"), 0, "", "wraps a " + folder.architecture + "; spread reads "
                     "sentence-transformers folders around encoders", "supported: " + supported_architectures());
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
  r.model.norm_position = c.norm.post ? "post" : "pre";
  r.model.activation = c.mlp.gelu_tanh ? "gelu_tanh" : "gelu";
  r.model.intermediate_size = c.mlp.width;
  r.model.layer_norm_eps = c.norm.eps;
  r.model.type_vocab_size = c.compat.type_vocab_size;
  r.model.mlm_transform = c.compat.mlm_transform;
  r.model.vocab_size = c.vocab_size;
  r.model.positions = c.positions.rope ? "rope" : "learned";
  r.model.rope_theta = c.positions.rope_theta;
  r.model.norm = c.norm.rms ? "rmsnorm" : "layernorm";
  r.model.norm_bias = c.norm.bias;
  r.model.mlp = !c.mlp.gated ? "gelu" : c.mlp.silu ? "swiglu" : "geglu";
  r.model.n_kv_head = c.attention.n_kv_head;
  r.model.tie_embeddings = c.compat.tie_embeddings;
  r.model.attention_window = c.attention.window;
  r.model.global_every = c.attention.global_every;
  r.model.local_rope_theta = c.positions.local_rope_theta;
  r.model.embedding_norm = c.norm.embedding;
  r.model.first_block_norm = c.norm.first_block;
  r.model.mlm_dense_bias = c.compat.mlm_dense_bias;
  r.model.dropout = 0.0;
  r.tokenizer.kind = "hf";
  // The tokenizer files sit beside the weights, or at the top of a sentence-transformers folder.
  const bool beside = fs::exists(path_in(folder.model_dir, "tokenizer.json")) ||
                      fs::exists(path_in(folder.model_dir, "vocab.txt")) ||
                      fs::exists(path_in(folder.model_dir, "vocab.json"));
  r.tokenizer.path = beside ? folder.model_dir : folder.dir;
  r.train.objective = c.causal ? Objective::lm : c.compat.mlm_transform ? Objective::mlm : Objective::contrastive;
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
