#include "spread/run/setup.h"

#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "spread/data/corpus.h"
#include "spread/data/hf_run_tokenizer.h"
#include "spread/model/eval_mode.h"
#include "spread/util/error.h"
#include "spread/util/file.h"
#include "spread/util/json_depth.h"
#include "spread/util/model_folder.h"

namespace fs = std::filesystem;

namespace spread {

TransformerConfig model_config(const Recipe& recipe, int64_t vocab_size) {
  if (recipe.model.vocab_size > 0 && recipe.model.vocab_size < vocab_size)
    throw user_error(recipe.source, 0, "model.vocab_size",
                     fmt::format("{} is fewer rows than the tokenizer's {} ids", recipe.model.vocab_size, vocab_size),
                     fmt::format("set it to at least {}, or 0 for the tokenizer's size", vocab_size));
  TransformerConfig c;
  c.vocab_size = recipe.model.vocab_size > 0 ? recipe.model.vocab_size : vocab_size;
  c.n_layer = recipe.model.n_layer;
  c.n_head = recipe.model.n_head;
  c.n_embd = recipe.model.n_embd;
  c.block_size = recipe.model.block_size;
  c.dropout = recipe.model.dropout;
  c.bias = recipe.model.bias;
  c.causal = recipe.model.causal;
  c.recompute = recipe.model.recompute;
  c.head_dim = recipe.objective().head == Head::token_vectors ? recipe.model.head_dim : 0;
  c.norm.post = recipe.model.norm_position == "post";
  c.mlp.gelu_tanh = recipe.model.activation == "gelu_tanh";
  c.mlp.width = recipe.model.intermediate_size;
  c.norm.eps = recipe.model.layer_norm_eps;
  c.compat.type_vocab_size = recipe.model.type_vocab_size;
  c.compat.mlm_transform = recipe.model.mlm_transform;
  c.positions.rope = recipe.model.positions == "rope";
  c.positions.rope_theta = recipe.model.rope_theta;
  c.norm.rms = recipe.model.norm == "rmsnorm";
  c.norm.bias = recipe.model.norm_bias;
  c.mlp.gated = recipe.model.mlp != "gelu";
  c.mlp.silu = recipe.model.mlp == "swiglu";
  c.attention.n_kv_head = recipe.model.n_kv_head;
  c.compat.tie_embeddings = recipe.model.tie_embeddings;
  c.attention.window = recipe.model.attention_window;
  c.attention.global_every = recipe.model.global_every;
  c.positions.local_rope_theta = recipe.model.local_rope_theta;
  c.norm.embedding = recipe.model.embedding_norm;
  c.norm.first_block = recipe.model.first_block_norm;
  c.compat.mlm_dense_bias = recipe.model.mlm_dense_bias;
  return c;
}

Recipe recipe_of_run(const std::string& run_dir, const std::vector<std::string>& overrides) {
  auto path = (fs::path(run_dir) / "recipe.toml").string();
  if (!fs::exists(path))
    throw user_error(run_dir, 0, "", "not a run directory (no recipe.toml)", "pass RUN_DIR = <run.out_dir>/<run.name>");
  Recipe r = load_recipe(path, overrides);
  // The run stays where it is, whatever out_dir/name say (the directory may have been moved).
  r.run.out_dir = fs::path(run_dir).parent_path().string();
  r.run.name = fs::path(run_dir).filename().string();
  return r;
}

void check_lowercase_matches(const Recipe& recipe, const Tokenizer& tokenizer) {
  if (recipe.tokenizer.lowercase == tokenizer.lowercases()) return;
  throw user_error(recipe.source, 0, "tokenizer.lowercase",
                   fmt::format("is {} but the run's tokenizer {} its texts", recipe.tokenizer.lowercase,
                               tokenizer.lowercases() ? "lower-cases" : "does not lower-case"),
                   fmt::format("set tokenizer.lowercase = {}, as the tokenizer (from train.init_from or the run) has it",
                               tokenizer.lowercases()));
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

std::vector<std::string> shard_files(const std::string& pattern, const std::string& key, const std::string& source) {
  glob_t found{};
  const int status = ::glob(pattern.c_str(), GLOB_ERR, nullptr, &found);
  std::vector<std::string> files(found.gl_pathv, found.gl_pathv + found.gl_pathc);
  globfree(&found);
  if (status == GLOB_NOMATCH || files.empty())
    throw user_error(source, 0, key, "'" + pattern + "' matches no file",
                     "give a pattern such as \"DIR/train_*.bin\" that names the shards");
  if (status != 0) throw user_error(source, 0, key, "cannot list the files of '" + pattern + "'", "check the folder");
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<ShardPattern> train_shard_patterns(const Recipe& recipe) {
  if (!recipe.data.shards.empty()) return {{"data.shards", recipe.data.shards, 1.0}};
  std::vector<ShardPattern> out;
  for (size_t i = 0; i < recipe.data.mix.size(); ++i)
    out.push_back({fmt::format("data.mix[{}].shards", i), recipe.data.mix[i].shards, recipe.data.mix[i].weight});
  return out;
}

std::vector<ShardList> shard_lists(const Recipe& recipe) {
  if (!recipe.data.sharded()) return {};
  std::vector<ShardList> out;
  for (const auto& p : train_shard_patterns(recipe)) out.push_back({p.key, shard_files(p.pattern, p.key, recipe.source)});
  out.push_back({"data.val_shards", shard_files(recipe.data.val_shards, "data.val_shards", recipe.source)});
  return out;
}

std::unique_ptr<TokenFile> validation_tokens(const Recipe& recipe, const std::string& run_dir, int64_t vocab_size) {
  if (!recipe.data.sharded()) return std::make_unique<TokenFile>(run_dir + "/val.bin");
  return std::make_unique<TokenFile>(shard_files(recipe.data.val_shards, "data.val_shards", recipe.source),
                                     vocab_size, "data.val_shards");
}

namespace {

void check_splits_hold_a_window(const Recipe& recipe, const RunData& data) {
  const auto too_short = [&](const TokenFile& t) { return t.size() < uint64_t(recipe.model.block_size) + 2; };
  for (const auto& train : data.train)
    if (too_short(*train.tokens) || too_short(*data.val))
      throw user_error(recipe.source, 0, "model.block_size",
                       fmt::format("{} is longer than a data split ({} train tokens{} / {} val tokens)",
                                   recipe.model.block_size, train.tokens->size(),
                                   train.key.empty() ? "" : " in " + train.key, data.val->size()),
                       "use more text or a smaller block_size / val_fraction");
}

// data.shards or [[data.mix]]: the tokens are read where they are; only the tokenizer is kept in the run directory.
RunData prepare_shard_data(const Recipe& recipe, const std::string& run_dir,
                           const std::function<void(const std::string&)>& log) {
  RunData data;
  if (fs::exists(fs::path(run_dir) / "tokenizer.model") || fs::exists(fs::path(run_dir) / kHfTokenizerFile)) {
    data.tokenizer = load_tokenizer(run_dir);
  } else {
    data.tokenizer = build_tokenizer(tokenizer_spec(recipe.tokenizer), "", run_dir);
    data.tokenizer->save(run_dir);
  }
  const int64_t vocab = data.tokenizer->vocab_size();
  const std::vector<ShardPattern> patterns = train_shard_patterns(recipe);
  double total_weight = 0;
  for (const auto& p : patterns) total_weight += p.weight;
  for (const auto& p : patterns) {
    const auto files = shard_files(p.pattern, p.key, recipe.source);
    data.train.push_back({std::make_unique<TokenFile>(files, vocab, p.key), p.weight, p.key});
    log(fmt::format("data: {} train tokens in {} shards ({} ... {}){}", data.train.back().tokens->size(), files.size(),
                    files.front(), files.back(),
                    recipe.data.mix.empty() ? ""
                                            : fmt::format(", {:.1f}% of the windows ({})",
                                                          100 * p.weight / total_weight, p.key)));
  }
  const auto val = shard_files(recipe.data.val_shards, "data.val_shards", recipe.source);
  data.val = std::make_unique<TokenFile>(val, vocab, "data.val_shards");
  log(fmt::format("data: {} val tokens in {} shards", data.val->size(), val.size()));
  check_splits_hold_a_window(recipe, data);
  return data;
}

}  // namespace

RunData prepare_data(const Recipe& recipe, const std::string& run_dir,
                     const std::function<void(const std::string&)>& log) {
  make_directories(run_dir);
  if (recipe.data.sharded()) return prepare_shard_data(recipe, run_dir, log);
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
      const TokenizerSpec spec = tokenizer_spec(recipe.tokenizer);
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
  data.train.push_back({std::make_unique<TokenFile>(train_path), 1.0, ""});
  data.val = std::make_unique<TokenFile>(val_path);
  log(fmt::format("data: {} train tokens, {} val tokens ({:.2f} bytes/token)", data.train[0].tokens->size(), data.val->size(),
                  double(data.val->source_bytes()) / double(std::max<uint64_t>(data.val->size(), 1))));
  check_splits_hold_a_window(recipe, data);
  return data;
}

namespace {

// The "kind" a spread tokenizer description records ("" when it names none).
std::string recorded_kind(const std::string& meta_path) {
  const auto bytes = read_whole_file(meta_path);
  if (!bytes) throw user_error(meta_path, 0, "", "cannot read the tokenizer description");
  refuse_deep_json(*bytes, meta_path);
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
  EvalModeGuard eval_mode(model);
  const auto& c = model->config();
  auto idx = torch::arange(c.block_size, torch::kLong).remainder(c.vocab_size).view({1, -1}).to(device);
  return torch::isfinite(model->forward(idx).logits).all().item<bool>();
}

int64_t resize_token_rows(std::map<std::string, torch::Tensor>& tensors, int64_t rows) {
  int64_t added = 0;
  for (const char* name : {"model.wte.weight", "model.lm_head.weight", "model.mlm_bias"}) {
    auto it = tensors.find(name);
    if (it == tensors.end()) continue;
    torch::Tensor& t = it->second;
    const int64_t have = t.size(0);
    if (have >= rows) {
      t = t.narrow(0, 0, rows);
      continue;
    }
    std::vector<int64_t> extra = t.sizes().vec();
    extra[0] = rows - have;
    t = torch::cat({t, t.mean(0, /*keepdim=*/true).expand(extra)});
    added = rows - have;
  }
  return added;
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
