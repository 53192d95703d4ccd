#include "spread/interchange/export.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <set>

#include "spread/data/tokenizer.h"
#include "spread/encode/multi_vector.h"
#include "spread/interchange/hf_import.h"
#include "spread/interchange/architecture.h"
#include "spread/interchange/hf_tokenizer.h"
#include "spread/interchange/sentence_modules_record.h"
#include "spread/run/checkpoint.h"
#include "spread/run/setup.h"
#include "spread/util/error.h"
#include "spread/util/file.h"
#include "spread/util/json_depth.h"

namespace fs = std::filesystem;

namespace spread {
namespace {

using Files = std::map<std::string, std::string>;  // path inside the folder -> bytes

std::string json_file(const nlohmann::json& j) { return j.dump(2) + "\n"; }

Checkpoint checkpoint_for(const std::string& run_dir, const std::optional<int64_t>& step) {
  if (!step) return checkpoint_to_use(run_dir, [](const std::string& w) { fmt::print(stderr, "warning: {}\n", w); });
  const std::string path = (fs::path(run_dir) / "ckpt" / fmt::format("step_{:08d}.ckpt", *step)).string();
  if (!fs::exists(path)) {
    std::vector<std::string> steps;
    for (const auto& f : list_checkpoints(run_dir)) steps.push_back(fs::path(f).stem().string().substr(5));
    throw user_error(run_dir, 0, "", fmt::format("no checkpoint of step {}", *step),
                     steps.empty() ? "the run has no checkpoint yet"
                                   : "its checkpoints: steps " + fmt::format("{}", fmt::join(steps, ", ")));
  }
  Checkpoint ckpt = read_checkpoint(path);
  if (auto bad = first_non_finite(ckpt))
    throw diverged_checkpoint_error(path, "tensor '" + *bad + "' holds NaN or Inf");
  return ckpt;
}

// Hugging Face's tokenizer files, where the kind has a tokenizer.json (interchange/hf_tokenizer.h).
void add_hf_tokenizer_files(const std::optional<nlohmann::json>& tokenizer_json, const Tokenizer& tokenizer,
                            int64_t max_length, Files& files) {
  if (!tokenizer_json) return;
  files["tokenizer.json"] = json_file(*tokenizer_json);
  const auto config = hf_tokenizer_config(tokenizer, max_length);
  files["tokenizer_config.json"] = json_file(config);
  nlohmann::json special = nlohmann::json::object();
  for (const auto& [key, value] : config.items())
    if (key.size() > 6 && key.compare(key.size() - 6, 6, "_token") == 0) special[key] = value;
  if (config.contains("additional_special_tokens"))
    special["additional_special_tokens"] = config["additional_special_tokens"];
  files["special_tokens_map.json"] = json_file(special);
}

void add_tokenizer_files(const std::string& run_dir, Files& files) {
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"tokenizer.model", "tokenizer.model"}, {"tokenizer.chars", "tokenizer.chars"},
           {"tokenizer.json", "spread_tokenizer.json"}}) {
    const auto path = (fs::path(run_dir) / from).string();
    if (!fs::exists(path)) continue;
    auto bytes = read_whole_file(path);
    if (!bytes) throw user_error(path, 0, "", "cannot read the run's tokenizer file");
    files[to] = *bytes;
  }
}

nlohmann::json pooling_config(const std::string& pooling, int64_t width, bool include_prompt) {
  return {{"word_embedding_dimension", width},
          {"pooling_mode_cls_token", pooling == "cls"},
          {"pooling_mode_mean_tokens", pooling == "mean"},
          {"pooling_mode_max_tokens", pooling == "max"},
          {"pooling_mode_mean_sqrt_len_tokens", false},
          {"pooling_mode_weightedmean_tokens", pooling == "weightedmean"},
          {"pooling_mode_lasttoken", pooling == "last"},
          {"include_prompt", include_prompt}};
}

// The sentence-transformers files around the encoder (names from SentenceTransformer.save()). A run started from a
// sentence-transformers folder keeps that folder's Normalize module, include_prompt and prompts
// (interchange/sentence_modules_record.h), so that its export encodes as the folder did.
void add_sentence_transformers_files(const Recipe& recipe, const TransformerConfig& cfg, bool lowercases,
                                     const std::string& run_dir, Files& files) {
  const SentenceTransformersModules wrapper = recorded_sentence_modules(run_dir).value_or(SentenceTransformersModules{});
  nlohmann::json modules = nlohmann::json::array(
      {{{"idx", 0}, {"name", "0"}, {"path", ""}, {"type", "sentence_transformers.models.Transformer"}},
       {{"idx", 1}, {"name", "1"}, {"path", "1_Pooling"}, {"type", "sentence_transformers.models.Pooling"}}});
  // Normalize saves no files: sentence-transformers loads it from its modules.json entry alone.
  if (wrapper.normalize)
    modules.push_back({{"idx", 2}, {"name", "2"}, {"path", "2_Normalize"}, {"type", "sentence_transformers.models.Normalize"}});
  files["modules.json"] = json_file(modules);
  files["config_sentence_transformers.json"] = json_file(
      {{"model_type", "SentenceTransformer"}, {"prompts", wrapper.prompts},
       {"default_prompt_name", wrapper.default_prompt_name.empty() ? nlohmann::json() : nlohmann::json(wrapper.default_prompt_name)},
       {"similarity_fn_name", "cosine"}});
  const int64_t max_length = recipe.data.max_length > 0 ? recipe.data.max_length : cfg.block_size;
  files["sentence_bert_config.json"] =
      json_file({{"max_seq_length", max_length}, {"do_lower_case", lowercases}});
  files["1_Pooling/config.json"] =
      json_file(pooling_config(recipe.loss.contrastive.pooling, cfg.n_embd, wrapper.include_prompt));
}

// The words of PyLate's skiplist_words that its convert_tokens_to_ids turns into spread's skiplist
// (punctuation_ids): each skipped id's entry in tokenizer.json's vocabulary ("\u2581," for a sentencepiece piece,
// "<0x2C>" for a byte piece), in id order; the decoded text where the kind has no tokenizer.json.
nlohmann::json skiplist_words(const Tokenizer& tokenizer, const std::optional<nlohmann::json>& tokenizer_json) {
  std::map<int64_t, std::string> vocab;
  if (tokenizer_json) {
    const nlohmann::json& entries = (*tokenizer_json)["model"]["vocab"];
    if (entries.is_array())  // Unigram: [piece, score] in id order
      for (size_t id = 0; id < entries.size(); ++id) vocab[int64_t(id)] = entries[id][0].get<std::string>();
    else  // BPE: piece -> id
      for (const auto& [piece, id] : entries.items()) vocab[id.get<int64_t>()] = piece;
  }
  nlohmann::json words = nlohmann::json::array();
  const std::vector<bool> skip = punctuation_ids(tokenizer);
  for (size_t id = 0; id < skip.size(); ++id)
    if (skip[id]) words.push_back(tokenizer_json ? vocab.at(int64_t(id)) : tokenizer.decode({int32_t(id)}));
  return words;
}

// The PyLate files around the MegatronBert model (names from PyLate's ColBERT.save and models/Dense.py): no pooling
// module; the multi-vector head as 1_Dense (PyLate's Dense: linear.weight [out, in], no bias, identity activation;
// PyLate L2-normalises the token vectors itself, as token_vectors does); the ColBERT keys of
// config_sentence_transformers.json. PyLate inserts the marker's id after [CLS] (convert_tokens_to_ids of the
// prefix), so the prefixes are the reserved tokens' names without PyLate's default trailing space: "[Q] " is no
// token of this vocabulary and PyLate would add it as a new, untrained one. A run of kind hf writes its markers
// (a PyLate folder's "[Q] ", or entries such as "[unused0]") and its skiplist_words as they are. Expansion tokens
// are never attended to (attend_to_expansion_tokens false); an empty skiplist_words keeps PyLate from falling back
// to its punctuation list.
void add_pylate_files(const Recipe& recipe, const TransformerConfig& cfg, const NamedTensors& params,
                      const Tokenizer& tokenizer, const std::optional<nlohmann::json>& tokenizer_json, Files& files) {
  const auto& m = recipe.loss.maxsim;
  const bool hf_markers = !recipe.tokenizer.query_marker.empty();  // a Hugging Face vocabulary's own entries
  files["modules.json"] = json_file(nlohmann::json::array(
      {{{"idx", 0}, {"name", "0"}, {"path", ""}, {"type", "sentence_transformers.models.Transformer"}},
       {{"idx", 1}, {"name", "1"}, {"path", "1_Dense"}, {"type", "pylate.models.Dense.Dense"}}}));
  files["config_sentence_transformers.json"] =
      json_file({{"model_type", "ColBERT"},
                 {"prompts", nlohmann::json::object()},
                 {"default_prompt_name", nullptr},
                 {"similarity_fn_name", "MaxSim"},
                 {"query_prefix", hf_markers ? recipe.tokenizer.query_marker : "[Q]"},
                 {"document_prefix", hf_markers ? recipe.tokenizer.document_marker : "[D]"},
                 {"query_length", m.query_length},
                 {"document_length", m.document_length},
                 {"attend_to_expansion_tokens", false},
                 {"skiplist_words", !m.skiplist               ? nlohmann::json::array()
                                    : !m.skiplist_words.empty() ? nlohmann::json(m.skiplist_words)
                                                                : skiplist_words(tokenizer, tokenizer_json)},
                 {"do_query_expansion", m.query_expansion}});
  files["sentence_bert_config.json"] = json_file({{"max_seq_length", m.document_length}, {"do_lower_case", false}});
  const torch::Tensor& head = params.at("head.weight");  // [head_dim, n_embd], nn.Linear's [out, in]
  files["1_Dense/config.json"] = json_file({{"in_features", cfg.n_embd},
                                            {"out_features", cfg.head_dim},
                                            {"bias", false},
                                            {"activation_function", "torch.nn.modules.linear.Identity"}});
  files["1_Dense/model.safetensors"] = safetensors_bytes({{"linear.weight", head}});
}

// MegatronBert, the layout sentence-transformers and PyLate load, attends both ways: a model trained with a causal
// mask would compute other embeddings there than in spread. (mlm and maxsim recipes cannot be causal.)
void refuse_causal_encoder(const Recipe& recipe) {
  if (recipe.is_encoder_objective() && recipe.model.causal)
    throw user_error(recipe.source, 0, "model.causal",
                     "a \"" + name_of(recipe.train.objective) + "\" run trained with a causal mask has no exported layout: "
                     "MegatronBert attends both ways, so sentence-transformers would compute other embeddings",
                     "retrain with model.causal = false to export it; spread encode gives this run's embeddings");
}

bool contains(const fs::path& outer, const fs::path& inner) {
  auto o = fs::weakly_canonical(outer), i = fs::weakly_canonical(inner);
  auto [end, _] = std::mismatch(o.begin(), o.end(), i.begin(), i.end());
  return end == o.end();
}

// Refuses an output folder that is a link or a file, cannot be written, contains the run, or holds anything but an
// earlier export.
void check_out_dir(const fs::path& out, const fs::path& run) {
  check_output_folder(out.string(), "--out");
  if (contains(out, run))
    throw user_error(out.string(), 0, "--out", "is (or contains) the run directory itself",
                     "choose a new folder for the export, e.g. " + (out / "hf").string());
  if (!fs::exists(out) || fs::is_empty(out) || fs::exists(out / kExportMarker)) return;
  throw user_error(out.string(), 0, "--out", "exists and holds files that are not an earlier spread export",
                   "choose a new or empty folder (an earlier export is replaced, nothing else is)");
}

// The files an earlier export in `out` wrote, as its marker lists them (none for exports made before it did).
std::set<std::string> files_of_earlier_export(const fs::path& out) {
  std::set<std::string> names;
  const std::string marker = (out / kExportMarker).string();
  const auto text = read_regular_file(marker, 1 << 20);
  if (!text || json_too_deep(*text)) return names;
  const auto doc = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_object() && doc.contains("files") && doc["files"].is_array())
    for (const auto& name : doc["files"])
      if (name.is_string()) names.insert(name.get<std::string>());
  return names;
}

// Replacing an earlier export replaces what spread wrote there, nothing else: a file the user put into it (notes,
// a README, a model card) is refused by name before anything is written, rather than deleted with the folder.
void refuse_foreign_files(const fs::path& out, const Files& files) {
  if (!fs::exists(out / kExportMarker)) return;
  std::set<std::string> ours = files_of_earlier_export(out);
  for (const auto& [name, bytes] : files) ours.insert(name);
  std::set<std::string> folders;
  for (const auto& name : ours)
    for (fs::path p = fs::path(name).parent_path(); !p.empty(); p = p.parent_path()) folders.insert(p.string());
  std::error_code ec;
  for (fs::recursive_directory_iterator it(out, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().lexically_relative(out).string();
    const bool folder = it->is_directory(ec) && !it->is_symlink(ec);
    if (folder ? folders.count(name) : ours.count(name)) continue;
    throw user_error(out.string(), 0, "--out", "holds " + name + ", which no spread export wrote; replacing the "
                     "earlier export would delete it", "move it out of the folder, or export into a new folder");
  }
}

// Where an export killed between its two renames left the earlier export (the temporary of "OUT.old"), it goes
// back to OUT when OUT is missing; everything else that killed exports left beside OUT is removed.
void clean_up_after_killed_exports(const fs::path& out) {
  const fs::path parent = out.parent_path();
  const std::string old_name = out.filename().string() + ".old";
  std::error_code ec;
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    if (stale_temporary_of(it->path().filename().string()) == old_name && !fs::exists(out))
      rename_file(it->path().string(), out.string());
  }
  remove_stale_temporaries(parent.string());
}

// Writes every file under a temporary folder beside `out`, then puts it in out's place; the temporary folder is
// removed when a write fails.
void write_folder(const Files& files, const fs::path& out) {
  const fs::path tmp = temporary_name(out), old = temporary_name(out.string() + ".old");
  make_directories(out.parent_path().string());
  clean_up_after_killed_exports(out);
  std::error_code ec;
  try {
    for (const auto& [name, bytes] : files) {
      make_directories((tmp / name).parent_path().string());
      write_file_atomic((tmp / name).string(), bytes);
    }
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  const bool replace = fs::exists(out);
  if (replace) rename_file(out.string(), old.string());
  rename_file(tmp.string(), out.string());
  if (replace) fs::remove_all(old, ec);
}

// The GPT-2, BERT and MegatronBert layouts have learned positions, LayerNorm with biases, a GELU MLP, one k/v head
// per query head, full attention and a tied output matrix: a model with another block would be written wrong. A
// Llama-shaped LM and a ModernBERT-shaped encoder have layouts of their own; a mixture (rope with LayerNorm in an
// LM, say) has none.
void refuse_modern_blocks(const TransformerConfig& cfg, const std::string& source) {
  if (architecture("llama").holds(cfg)) return;
  if (architecture("modernbert").holds(cfg)) {
    if (cfg.attention.window > 0 && cfg.attention.global_every == 0)
      throw user_error(source, 0, "model.global_every", "is 0 (every layer local), which ModernBERT cannot say: its "
                       "layer 0 is always global", "train with model.global_every >= 1 (ModernBERT: 3)");
    return;
  }
  const char* key = cfg.positions.rope                                       ? "model.positions"
                    : cfg.norm.rms                                           ? "model.norm"
                    : !cfg.norm.bias                                         ? "model.norm_bias"
                    : cfg.mlp.gated || cfg.mlp.silu                          ? "model.mlp"
                    : cfg.kv_heads() != cfg.n_head                           ? "model.n_kv_head"
                    : !cfg.compat.tie_embeddings                             ? "model.tie_embeddings"
                    : cfg.attention.window > 0                               ? "model.attention_window"
                    : cfg.norm.embedding && !cfg.norm.post                   ? "model.embedding_norm"
                    : !cfg.norm.first_block                                  ? "model.first_block_norm"
                    : cfg.compat.mlm_transform && !cfg.compat.mlm_dense_bias ? "model.mlm_dense_bias"
                                                                             : nullptr;
  if (key)
    throw user_error(source, 0, key, "is not the default, and spread has no Hugging Face layout for this block "
                     "(GPT-2, BERT and MegatronBert have learned positions, LayerNorm, a GELU MLP, full heads and "
                     "attention and a tied output; LlamaForCausalLM is a causal LM with rope, rmsnorm, swiglu and "
                     "bias = false; ModernBERT an encoder with rope, geglu, embedding_norm and first_block_norm = "
                     "false)", "use the run with spread's own commands (eval, encode, generate, diagnose)");
}

}  // namespace

ExportResult export_run(const ExportRequest& request) {
  const fs::path run = request.run_dir;
  fs::path out = fs::absolute(request.out_dir).lexically_normal();
  if (!out.has_filename()) out = out.parent_path();  // "hf/": the folder hf, not an entry inside it
  const Recipe recipe = recipe_of_run(request.run_dir);
  refuse_causal_encoder(recipe);
  check_out_dir(out, run);
  auto tokenizer = load_tokenizer(request.run_dir);
  const Checkpoint ckpt = checkpoint_for(request.run_dir, request.step);
  const TransformerConfig cfg = model_config(recipe, tokenizer->vocab_size());
  Transformer model(cfg);
  load_model_weights(model, ckpt.tensors, ckpt.path);
  const NamedTensors params = spread_parameters(model);

  ExportResult result;
  result.step = ckpt.step;
  const auto tokenizer_json = hf_tokenizer_json(request.run_dir, *tokenizer);
  Files files;
  refuse_modern_blocks(cfg, recipe.source);
  if (!recipe.is_encoder_objective()) {
    if (!cfg.causal)
      throw user_error(recipe.source, 0, "model.causal", "an LM run with a bidirectional model has no HF layout",
                       "export LM runs trained with causal = true");
    if (cfg.norm.post || cfg.compat.type_vocab_size > 0 || cfg.compat.mlm_transform)
      throw user_error(
          recipe.source, 0,
          cfg.norm.post                    ? "model.norm_position"
          : cfg.compat.type_vocab_size > 0 ? "model.type_vocab_size"
                                           : "model.mlm_transform",
          "GPT-2 and Llama have pre-norm blocks, no token types and no MLM head: this LM has no layout",
          "export LM runs trained with norm_position = \"pre\", type_vocab_size = 0, mlm_transform = false");
    if (tokenizer->lowercases())
      throw user_error(recipe.source, 0, "tokenizer.lowercase", "is true, and the GPT-2 and Llama layouts have no "
                       "lower-casing "
                       "step: transformers would tokenize the text as written", "use `spread eval`/`generate` on the run");
    const Architecture& lm = *architecture_holding(cfg);  // gpt2 or llama, past the checks above
    result.layout = lm.layout;
    ConfigTokenIds ids;
    ids.bos = tokenizer->bos_id();
    ids.eos = tokenizer->eos_id();
    files["config.json"] = json_file(lm.write_config(cfg, ids));
    files["model.safetensors"] = safetensors_bytes(lm.write_weights(params, cfg));
  } else {
    // A post-LN encoder (an imported BERT or DistilBERT) goes back as BertModel or DistilBertModel; spread's pre-LN
    // one is MegatronBert.
    if (cfg.norm.post && !cfg.bias)
      throw user_error(recipe.source, 0, "model.bias", "a post-LayerNorm encoder exports as BertModel or "
                       "DistilBertModel, which have biases", "train it with model.bias = true");
    if (cfg.norm.post && cfg.compat.type_vocab_size == 0 && !architecture("distilbert").holds(cfg))
      throw user_error(recipe.source, 0, "model.layer_norm_eps", "a post-LayerNorm encoder without token types "
                       "exports as DistilBertModel, whose LayerNorms have epsilon 1e-12",
                       "train it with model.layer_norm_eps = 1e-12, or with model.type_vocab_size = 2 (BertModel)");
    const Architecture& encoder = *architecture_holding(cfg);  // bert, megatron-bert, distilbert or modernbert
    result.layout = recipe.objective().head == Head::token_vectors ? "pylate" : encoder.layout;
    const SpecialIds special = tokenizer->special_ids();
    ConfigTokenIds ids;
    ids.pad = special.pad;
    ids.cls = special.cls;
    ids.sep = special.sep;
    files["config.json"] = json_file(encoder.write_config(cfg, ids));
    files["model.safetensors"] = safetensors_bytes(encoder.write_weights(params, cfg));
    if (result.layout == "pylate") add_pylate_files(recipe, cfg, params, *tokenizer, tokenizer_json, files);
    else add_sentence_transformers_files(recipe, cfg, tokenizer->lowercases(), request.run_dir, files);
  }
  result.bytes = int64_t(files["model.safetensors"].size());
  add_tokenizer_files(request.run_dir, files);
  const int64_t max_length = recipe.is_encoder_objective() && recipe.data.max_length > 0 ? recipe.data.max_length
                                                                                         : cfg.block_size;
  add_hf_tokenizer_files(tokenizer_json, *tokenizer, max_length, files);
  if (tokenizer->kind() == "hf") files["tokenizer.json"] = hf_tokenizer_bytes(request.run_dir);
  std::vector<std::string> names = {kExportMarker};
  for (const auto& [name, bytes] : files) names.push_back(name);
  files[kExportMarker] = json_file({{"layout", result.layout},
                                    {"run", fs::absolute(run).lexically_normal().string()},
                                    {"step", ckpt.step},
                                    {"objective", name_of(recipe.train.objective)},
                                    {"files", names}});
  refuse_foreign_files(out, files);
  write_folder(files, out);
  return result;
}

NamedTensors read_exported_lm_weights(const std::string& dir, const TransformerConfig& cfg) {
  const std::string config_path = (fs::path(dir) / "config.json").string();
  auto text = read_whole_file(config_path);
  if (!text) throw user_error(config_path, 0, "", "cannot read the file");
  refuse_deep_json(*text, config_path);
  const auto config = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object())
    throw user_error(config_path, 0, "", "is not a JSON object", "give a Hugging Face model folder");
  const std::string type = config.value("model_type", std::string("missing"));
  if (type != "gpt2" && type != "llama")
    throw user_error(config_path, 0, "model_type", "is " + type + "; init_from loads exported GPT-2 and Llama LMs",
                     "export a causal LM run (spread export) or give a GPT-2 or Llama model folder");
  const bool llama = type == "llama";
  using Key = std::pair<std::string, int64_t>;
  const std::vector<Key> keys =
      llama ? std::vector<Key>{{"num_hidden_layers", cfg.n_layer}, {"num_attention_heads", cfg.n_head},
                               {"num_key_value_heads", cfg.kv_heads()}, {"hidden_size", cfg.n_embd},
                               {"intermediate_size", cfg.mlp_width()}, {"vocab_size", cfg.vocab_size}}
            : std::vector<Key>{{"n_layer", cfg.n_layer}, {"n_head", cfg.n_head}, {"n_embd", cfg.n_embd},
                               {"vocab_size", cfg.vocab_size}};
  for (const auto& [key, want] : keys)
    if (!config.contains(key) || !config[key].is_number_integer() || config[key].get<int64_t>() != want)
      throw user_error(config_path, 0, key, fmt::format("is {} but this model has {}",
                                                        config.contains(key) ? config[key].dump() : "missing", want),
                       "use the same [model] shape (and tokenizer) as the exported model");
  if (llama) return read_hf_model_folder(dir).weights;
  // GPT-2's reader checks the biases against this model's (zeros for a model without), which a folder's config
  // cannot say.
  const std::string weights = (fs::path(dir) / "model.safetensors").string();
  return architecture("gpt2").read_weights(read_safetensors(weights), cfg, config, weights);
}

}  // namespace spread
