#include "spread/train/run.h"

#include <fmt/format.h>

#include "spread/data/hf/tokenizer.h"
#include "spread/data/hf_run_tokenizer.h"
#include "spread/data/special_tokens.h"
#include "spread/data/text_stream.h"
#include "spread/train/checkpoint.h"
#include "spread/train/setup.h"
#include "spread/train/trainer.h"
#include "spread/util/error.h"

namespace spread {
namespace {

// A PyLate folder's tokenizer: the Hugging Face one with the folder's query and document prefixes (added tokens
// such as "[Q] ") as spread's [Q] / [D] markers, which multi-vector encoding inserts after [CLS].
class MarkedTokenizer final : public Tokenizer {
 public:
  MarkedTokenizer(std::shared_ptr<Tokenizer> inner, int32_t query, int32_t document)
      : inner_(std::move(inner)), special_(inner_->special_ids()) {
    special_.query = query;
    special_.document = document;
  }
  std::vector<int32_t> encode(const std::string& text) const override { return inner_->encode(text); }
  std::string decode(const std::vector<int32_t>& ids) const override { return inner_->decode(ids); }
  int64_t vocab_size() const override { return inner_->vocab_size(); }
  std::string kind() const override { return inner_->kind(); }
  void save(const std::string& run_dir) const override { inner_->save(run_dir); }
  int32_t bos_id() const override { return inner_->bos_id(); }
  int32_t eos_id() const override { return inner_->eos_id(); }
  SpecialIds special_ids() const override { return special_; }

 private:
  std::shared_ptr<Tokenizer> inner_;
  SpecialIds special_;
};

// The id of a vocabulary entry as PyLate's convert_tokens_to_ids gives it: the entry's, else [UNK]'s.
int32_t entry_id(const hf::Tokenizer& hf, const std::string& entry, const std::string& source) {
  if (auto id = hf.token_to_id(entry)) return int32_t(*id);
  if (auto unk = hf.token_to_id("[UNK]")) return int32_t(*unk);
  throw user_error(source, 0, "", "the tokenizer has no entry '" + entry + "' (nor [UNK])");
}

void add_colbert_markers(LoadedRun& run, const ColbertModules& m, const std::string& folder) {
  const std::string source = folder + "/config_sentence_transformers.json";
  const auto hf = hf::Tokenizer::load(run.recipe.tokenizer.path);
  for (const std::string* prefix : {&m.query_prefix, &m.document_prefix})
    if (!hf->token_to_id(*prefix))
      throw user_error(source, 0, prefix == &m.query_prefix ? "query_prefix" : "document_prefix",
                       "'" + *prefix + "' is no token of the folder's tokenizer", "PyLate adds it as a token");
  run.tokenizer = std::make_shared<MarkedTokenizer>(run.tokenizer, int32_t(*hf->token_to_id(m.query_prefix)),
                                                    int32_t(*hf->token_to_id(m.document_prefix)));
  run.colbert_skip.assign(size_t(run.tokenizer->vocab_size()), false);
  for (const auto& word : m.skiplist_words) {
    const int32_t id = entry_id(*hf, word, source);
    if (id < 0 || size_t(id) >= run.colbert_skip.size())
      throw user_error(source, 0, "skiplist_words", fmt::format("'{}' has id {}, outside the vocabulary", word, id));
    run.colbert_skip[size_t(id)] = true;
  }
}

LoadedRun load_model_folder(const std::string& dir) {
  HfModelFolder folder = read_hf_model_folder(dir);
  LoadedRun run;
  run.dir = dir;
  run.model_folder = true;
  run.sentence = folder.sentence;
  run.recipe = recipe_of_model_folder(folder);
  run.tokenizer = load_hf_run_tokenizer(run.recipe.tokenizer.path);
  // Embedding tables are often padded past the tokenizer (to a multiple of 8 or 64); never the other way.
  if (run.tokenizer->vocab_size() > folder.config.vocab_size)
    throw user_error(run.recipe.source, 0, "vocab_size",
                     fmt::format("is {} but the folder's tokenizer has {} tokens", folder.config.vocab_size,
                                 run.tokenizer->vocab_size()),
                     "the tokenizer files do not belong to this model");
  run.colbert = folder.colbert;
  if (folder.colbert) add_colbert_markers(run, *folder.colbert, dir);
  run.model = Transformer(folder.config);
  load_model_weights(run.model, folder.weights, folder.model_dir);
  run.model->eval();
  return run;
}

}  // namespace

LoadedRun load_run(const std::string& run_dir) {
  if (is_model_folder(run_dir)) return load_model_folder(run_dir);
  LoadedRun run;
  run.dir = run_dir;
  run.recipe = recipe_of_run(run_dir);
  run.tokenizer = load_tokenizer(run_dir);
  const Checkpoint ckpt =
      checkpoint_to_use(run_dir, [](const std::string& warning) { fmt::print(stderr, "warning: {}\n", warning); });
  run.model = Transformer(model_config(run.recipe, run.tokenizer->vocab_size()));
  load_model_weights(run.model, ckpt.tensors, run_dir);
  run.model->to(recipe_device(run.recipe));
  if (!output_is_finite(run.model, recipe_device(run.recipe)))
    throw diverged_checkpoint_error(ckpt.path, "the model's output is NaN or Inf");
  run.model->eval();
  run.step = ckpt.step;
  return run;
}

void generate_text(LoadedRun& run, const std::string& prompt, const SampleOptions& options,
                   const std::function<void(const std::string&)>& emit) {
  // An encoder's head is no next-token distribution: sampling from it prints noise.
  if (run.recipe.train.objective != "lm")
    throw user_error(run.dir + "/recipe.toml", 0, "train.objective",
                     "spread generate samples from a language model (\"lm\"); this run is \"" +
                         run.recipe.train.objective + "\"",
                     "use spread encode or spread eval for an encoder run");
  auto ids = run.tokenizer->encode(prompt);
  if (ids.empty()) ids = run.tokenizer->encode("\n");
  emit(run.tokenizer->decode(ids));
  TextStream stream(*run.tokenizer, ids);
  generate(run.model, ids, options, recipe_device(run.recipe), [&](int32_t id) { emit(stream.push(id)); });
  emit(stream.finish());
}

std::vector<torch::Tensor> text_hidden_states(LoadedRun& run, const std::string& text) {
  torch::NoGradGuard no_grad;
  // Encoders read "[CLS] text [SEP]" as in training; an LM reads the text alone.
  const auto block = run.model->config().block_size;
  const int64_t length = run.recipe.data.max_length > 0 ? run.recipe.data.max_length : block;
  auto ids = run.recipe.is_encoder_objective() ? encode_for_encoder(*run.tokenizer, text, length)
                                               : run.tokenizer->encode(text);
  if (int64_t(ids.size()) > block) ids.resize(size_t(block));
  if (ids.empty()) return {};
  auto idx = torch::tensor(std::vector<int64_t>(ids.begin(), ids.end()), torch::kLong).view({1, -1});
  auto out = run.model->forward(idx.to(recipe_device(run.recipe)), /*want_hidden=*/true, /*want_logits=*/false);
  std::vector<torch::Tensor> layers;
  for (const auto& h : out.hidden) layers.push_back(h[0].to(torch::kCPU));
  layers.push_back(out.final_hidden[0].to(torch::kCPU));
  return layers;
}

}  // namespace spread
