#include "spread/train/setup.h"

#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "spread/data/corpus.h"
#include "spread/data/hf_run_tokenizer.h"
#include "spread/export/export.h"
#include "spread/export/hf_import.h"
#include "spread/util/error.h"
#include "spread/util/file.h"

namespace fs = std::filesystem;

namespace spread {

TransformerConfig model_config(const Recipe& recipe, int64_t vocab_size) {
  TransformerConfig c;
  c.vocab_size = vocab_size;
  c.n_layer = recipe.model.n_layer;
  c.n_head = recipe.model.n_head;
  c.n_embd = recipe.model.n_embd;
  c.block_size = recipe.model.block_size;
  c.dropout = recipe.model.dropout;
  c.bias = recipe.model.bias;
  c.causal = recipe.model.causal;
  c.recompute = recipe.model.recompute;
  c.head_dim = recipe.train.objective == "maxsim" ? recipe.model.head_dim : 0;
  c.post_norm = recipe.model.norm_position == "post";
  c.gelu_tanh = recipe.model.activation == "gelu_tanh";
  c.intermediate_size = recipe.model.intermediate_size;
  c.layer_norm_eps = recipe.model.layer_norm_eps;
  c.type_vocab_size = recipe.model.type_vocab_size;
  c.mlm_transform = recipe.model.mlm_transform;
  return c;
}

namespace {

// A recipe value that the folder decides: the folder's, unless the recipe set another one than the default.
template <class T>
void adopt(T& value, const T& folder_value, const T& default_value, const std::string& key, const Recipe& recipe) {
  if (value != default_value && value != folder_value)
    throw user_error(recipe.source, 0, key, fmt::format("is {} but the model folder {} has {}", value,
                                                        recipe.train.init_from, folder_value),
                     "leave the key out: the folder decides the model's shape and tokenizer");
  value = folder_value;
}

// The recipe checks that read the model's shape, which parse_recipe leaves to this point when the folder gives it.
void check_against_folder_shape(const Recipe& r) {
  const auto& m = r.model;
  auto longer = [&](int64_t length, const std::string& key) {
    if (length > m.block_size)
      throw user_error(r.source, 0, key, fmt::format("{} is longer than the model folder's {} positions", length,
                                                     m.block_size), "lower " + key);
  };
  longer(r.data.max_length, "data.max_length");
  if (r.train.objective == "maxsim") {
    longer(r.loss.maxsim.query_length, "loss.maxsim.query_length");
    longer(r.loss.maxsim.document_length, "loss.maxsim.document_length");
  }
  for (auto dim : r.loss.contrastive.matryoshka_dims)
    if (dim > m.n_embd)
      throw user_error(r.source, 0, "loss.contrastive.matryoshka_dims",
                       fmt::format("{} is wider than the model folder's width {}", dim, m.n_embd));
  // An LM needs the causal mask a decoder has; mlm and maxsim need an encoder's both-ways attention (contrastive
  // takes either: decoder embedders pool the last token).
  const std::string& objective = r.train.objective;
  if ((objective == "lm" && !m.causal) || ((objective == "mlm" || objective == "maxsim") && m.causal))
    throw user_error(r.source, 0, "train.objective",
                     fmt::format("\"{}\" does not fit the model folder {}, a {} model", objective, r.train.init_from,
                                 m.causal ? "causal (GPT-2)" : "bidirectional (BERT)"),
                     m.causal ? "use objective lm or contrastive" : "use objective mlm, contrastive or maxsim");
  if (objective == "maxsim" && r.tokenizer.query_marker.empty())
    throw user_error(r.source, 0, "tokenizer.query_marker",
                     fmt::format("the model folder {} is no PyLate folder, so it names no [Q] / [D] markers",
                                 r.train.init_from),
                     "set tokenizer.query_marker and document_marker to two entries of its vocabulary (BERT's "
                     "\"[unused0]\" and \"[unused1]\")");
}

// A PyLate folder decides the multi-vector head, the markers and the skiplist; its lengths and query expansion are
// the defaults of the run, which the recipe may change.
void adopt_colbert(Recipe& r, const Recipe& implied) {
  const ModelConfig dm;
  const TokenizerConfig dt;
  const MaxSimConfig ds;
  adopt(r.model.head_dim, implied.model.head_dim, dm.head_dim, "model.head_dim", r);
  adopt(r.tokenizer.query_marker, implied.tokenizer.query_marker, dt.query_marker, "tokenizer.query_marker", r);
  adopt(r.tokenizer.document_marker, implied.tokenizer.document_marker, dt.document_marker,
        "tokenizer.document_marker", r);
  auto& m = r.loss.maxsim;
  const auto& f = implied.loss.maxsim;
  adopt(m.skiplist_words, f.skiplist_words, ds.skiplist_words, "loss.maxsim.skiplist_words", r);
  m.skiplist = m.skiplist || f.skiplist;
  if (m.query_length == ds.query_length) m.query_length = f.query_length;
  if (m.document_length == ds.document_length) m.document_length = f.document_length;
  if (m.query_expansion == ds.query_expansion) m.query_expansion = f.query_expansion;
}

}  // namespace

Recipe adopt_model_folder(const Recipe& recipe) {
  const std::string& from = recipe.train.init_from;
  if (from.empty() || !is_foreign_model_folder(from)) return recipe;
  const Recipe implied = recipe_of_model_folder(read_hf_model_folder(from, /*with_weights=*/false));
  Recipe r = recipe;
  const ModelConfig d;
  auto& m = r.model;
  const auto& f = implied.model;
  adopt(m.n_layer, f.n_layer, d.n_layer, "model.n_layer", r);
  adopt(m.n_head, f.n_head, d.n_head, "model.n_head", r);
  adopt(m.n_embd, f.n_embd, d.n_embd, "model.n_embd", r);
  adopt(m.block_size, f.block_size, d.block_size, "model.block_size", r);
  adopt(m.bias, f.bias, d.bias, "model.bias", r);
  adopt(m.norm_position, f.norm_position, d.norm_position, "model.norm_position", r);
  adopt(m.activation, f.activation, d.activation, "model.activation", r);
  adopt(m.intermediate_size, f.intermediate_size, d.intermediate_size, "model.intermediate_size", r);
  adopt(m.layer_norm_eps, f.layer_norm_eps, d.layer_norm_eps, "model.layer_norm_eps", r);
  adopt(m.type_vocab_size, f.type_vocab_size, d.type_vocab_size, "model.type_vocab_size", r);
  // Encoders attend both ways whatever the recipe's default (true, for LMs); an LM folder stays causal.
  if (implied.train.objective == "lm") adopt(m.causal, f.causal, d.causal, "model.causal", r);
  else m.causal = false;
  // The MLM head is BERT's own when training MLM from a folder that has one; other objectives do not use it.
  m.mlm_transform = r.train.objective == "mlm" && f.mlm_transform;
  const TokenizerConfig dt;
  adopt(r.tokenizer.kind, implied.tokenizer.kind, dt.kind, "tokenizer.kind", r);
  if (!recipe.tokenizer.path.empty() &&
      fs::weakly_canonical(recipe.tokenizer.path) != fs::weakly_canonical(implied.tokenizer.path))
    throw user_error(recipe.source, 0, "tokenizer.path", fmt::format("is {} but the model folder {} has its own "
                     "tokenizer ({})", recipe.tokenizer.path, from, implied.tokenizer.path),
                     "leave the key out: the folder decides the model's shape and tokenizer");
  r.tokenizer.path = implied.tokenizer.path;
  if (r.data.max_length == 0) r.data.max_length = implied.data.max_length;
  if (r.loss.contrastive.pooling == ContrastiveConfig().pooling) r.loss.contrastive.pooling = implied.loss.contrastive.pooling;
  if (implied.train.objective == "maxsim" && r.train.objective == "maxsim") adopt_colbert(r, implied);
  check_against_folder_shape(r);
  return r;
}

torch::Device recipe_device(const Recipe& recipe) {
  const std::string& name = recipe.run.device;
  try {
    torch::Device device(name);
    if (device.is_cuda() && !torch::cuda::is_available())
      throw user_error(recipe.source, 0, "run.device", "'" + name + "' requested but CUDA is not available here",
                       "use device = \"cpu\" or a LibTorch built with CUDA");
    return device;
  } catch (const c10::Error&) {
    throw user_error(recipe.source, 0, "run.device", "'" + name + "' is not a device", "use cpu, cuda or cuda:N");
  }
}

RunData prepare_data(const Recipe& recipe, const std::string& run_dir,
                     const std::function<void(const std::string&)>& log) {
  make_directories(run_dir);
  const std::string train_path = (fs::path(run_dir) / "train.bin").string();
  const std::string val_path = (fs::path(run_dir) / "val.bin").string();
  const bool have_tokenizer = fs::exists(fs::path(run_dir) / "tokenizer.model") ||
                              fs::exists(fs::path(run_dir) / "tokenizer.chars") ||
                              fs::exists(fs::path(run_dir) / kHfTokenizerFile);
  RunData data;
  if (!have_tokenizer || !fs::exists(train_path) || !fs::exists(val_path)) {
    Corpus corpus = load_corpus(recipe.data, recipe.source);
    if (have_tokenizer) {
      data.tokenizer = load_tokenizer(run_dir);
    } else {
      TokenizerSpec spec{recipe.tokenizer.kind, recipe.tokenizer.vocab_size, recipe.tokenizer.model, recipe.tokenizer.path};
      // The char vocabulary covers the whole corpus (as nanoGPT's); subword models learn from the train split.
      data.tokenizer = build_tokenizer(spec, spec.kind == "char" ? corpus.train + corpus.val : corpus.train, run_dir);
      data.tokenizer->save(run_dir);
      log(fmt::format("tokenizer: {} with {} ids, saved in {}", data.tokenizer->kind(), data.tokenizer->vocab_size(),
                      run_dir));
    }
    // A present token file is kept (it is checked against the run's record); both follow a new tokenizer.
    if (!have_tokenizer || !fs::exists(train_path))
      write_token_file(train_path, data.tokenizer->encode(corpus.train), corpus.train.size());
    if (!have_tokenizer || !fs::exists(val_path))
      write_token_file(val_path, data.tokenizer->encode(corpus.val), corpus.val.size());
  } else {
    data.tokenizer = load_tokenizer(run_dir);
  }
  data.train = std::make_unique<TokenFile>(train_path);
  data.val = std::make_unique<TokenFile>(val_path);
  log(fmt::format("data: {} train tokens, {} val tokens ({:.2f} bytes/token)", data.train->size(), data.val->size(),
                  double(data.val->source_bytes()) / double(std::max<uint64_t>(data.val->size(), 1))));
  if (data.val->size() < uint64_t(recipe.model.block_size) + 2 || data.train->size() < uint64_t(recipe.model.block_size) + 2)
    throw user_error(recipe.source, 0, "model.block_size",
                     fmt::format("{} is longer than a data split ({} train / {} val tokens)", recipe.model.block_size,
                                 data.train->size(), data.val->size()),
                     "use more text or a smaller block_size / val_fraction");
  return data;
}

namespace {

// The "kind" a spread tokenizer description records ("" when it names none).
std::string recorded_kind(const std::string& meta_path) {
  const auto bytes = read_whole_file(meta_path);
  if (!bytes) throw user_error(meta_path, 0, "", "cannot read the tokenizer description");
  const auto meta = nlohmann::json::parse(*bytes, nullptr, /*allow_exceptions=*/false);
  if (meta.is_discarded()) throw user_error(meta_path, 0, "", "not valid JSON", "copy the exported folder again");
  return meta.is_object() && meta.contains("kind") && meta["kind"].is_string() ? meta["kind"].get<std::string>() : "";
}

}  // namespace

void copy_tokenizer_files(const Recipe& recipe, const std::string& run_dir) {
  const fs::path from = recipe.train.init_from;
  // Another model folder's tokenizer is the recipe's kind "hf" one (adopt_model_folder): nothing to copy.
  if (is_foreign_model_folder(from.string())) return;
  if (is_hf_model_dir(from.string())) {
    // A spread export keeps the run's record as spread_tokenizer.json (tokenizer.json is Hugging Face's name).
    if (!fs::exists(from / "spread_tokenizer.json")) return;
    make_directories(run_dir);
    const auto copy = [&](const char* name, const char* as) {
      if (fs::exists(from / name))
        fs::copy_file(from / name, fs::path(run_dir) / as, fs::copy_options::overwrite_existing);
    };
    copy("spread_tokenizer.json", "tokenizer.json");
    copy("tokenizer.model", "tokenizer.model");
    copy("tokenizer.chars", "tokenizer.chars");
    // Of a run of kind hf, the folder's tokenizer.json is the run's tokenizer.hf.json, written as it was.
    if (recorded_kind((from / "spread_tokenizer.json").string()) == "hf") copy("tokenizer.json", kHfTokenizerFile);
    return;
  }
  if (!fs::exists(from / "tokenizer.json"))
    throw user_error(recipe.source, 0, "train.init_from", "'" + from.string() + "' holds no tokenizer.json",
                     "give the directory of a run trained with spread (<run.out_dir>/<run.name>)");
  make_directories(run_dir);
  for (const char* name : {"tokenizer.json", "tokenizer.model", "tokenizer.chars", kHfTokenizerFile})
    if (fs::exists(from / name)) fs::copy_file(from / name, fs::path(run_dir) / name, fs::copy_options::overwrite_existing);
}

bool output_is_finite(Transformer& model, const torch::Device& device) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  const auto& c = model->config();
  auto idx = torch::arange(c.block_size, torch::kLong).remainder(c.vocab_size).view({1, -1}).to(device);
  const bool finite = torch::isfinite(model->forward(idx).logits).all().item<bool>();
  model->train(was_training);
  return finite;
}

void load_model_weights(Transformer& model, const std::map<std::string, torch::Tensor>& tensors,
                        const std::string& source, MissingHead missing_head) {
  torch::NoGradGuard no_grad;
  for (auto& item : model->named_parameters()) {
    auto it = tensors.find("model." + item.key());
    if (it == tensors.end() && missing_head == MissingHead::KeepInitial && item.key().rfind("head.", 0) == 0) continue;
    if (it == tensors.end())
      throw user_error(source, 0, "", "checkpoint lacks parameter '" + item.key() + "'",
                       "was it written with another model shape? check [model] in recipe.toml");
    if (!it->second.sizes().equals(item.value().sizes()))
      throw user_error(source, 0, "", fmt::format("parameter '{}' has shape {} in the checkpoint but {} in the model",
                                                  item.key(), fmt::join(it->second.sizes(), "x"),
                                                  fmt::join(item.value().sizes(), "x")));
    item.value().copy_(it->second);
  }
}

}  // namespace spread
