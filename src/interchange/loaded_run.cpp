#include "spread/interchange/loaded_run.h"

#include <fmt/format.h>

#include "spread/data/tokenizer.h"
#include "spread/data/special_tokens.h"
#include "spread/data/text_stream.h"
#include "spread/run/checkpoint.h"
#include "spread/run/setup.h"
#include "spread/util/error.h"

namespace spread {
namespace {

LoadedRun load_model_folder(const std::string& dir) {
  HfModelFolder folder = read_hf_model_folder(dir);
  LoadedRun run;
  run.dir = dir;
  run.model_folder = true;
  run.sentence = folder.sentence;
  run.recipe = recipe_of_model_folder(folder);
  // A PyLate folder's prefixes ("[Q] ", added tokens) are spread's markers, which encoding inserts after [CLS].
  run.tokenizer = build_tokenizer(tokenizer_spec(run.recipe.tokenizer), "", dir);
  // Embedding tables are often padded past the tokenizer (to a multiple of 8 or 64); never the other way.
  if (run.tokenizer->vocab_size() > folder.config.vocab_size)
    throw user_error(run.recipe.source, 0, "vocab_size",
                     fmt::format("is {} but the folder's tokenizer has {} tokens", folder.config.vocab_size,
                                 run.tokenizer->vocab_size()),
                     "the tokenizer files do not belong to this model");
  run.colbert = folder.colbert;
  run.model = Transformer(folder.config, WeightInit::none);  // every parameter is loaded next
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
  run.model = Transformer(model_config(run.recipe, run.tokenizer->vocab_size()), WeightInit::none);
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
  // A model folder has no recipe.toml: its config.json (the recipe's source) says it is an encoder.
  if (run.recipe.objective().head != Head::next_token && run.model_folder)
    throw user_error(run.recipe.source, 0, "", "describes an encoder, which has no next-token head to sample from",
                     "spread generate samples from a causal language model (a GPT-2 or Llama folder); use spread "
                     "encode or spread eval for this one");
  if (run.recipe.objective().head != Head::next_token)
    throw user_error(run.dir + "/recipe.toml", 0, "train.objective",
                     "spread generate samples from a language model (" +
                         objective_names([](const ObjectiveTraits& t) { return t.head == Head::next_token; }) +
                         "); this run is \"" + name_of(run.recipe.train.objective) + "\"",
                     "use spread encode or spread eval for an encoder run");
  auto ids = run.tokenizer->encode(prompt);
  if (ids.empty()) ids = run.tokenizer->encode("\n");
  emit(run.tokenizer->decode(ids));
  TextStream stream(*run.tokenizer, ids);
  SampleOptions limited = options;
  limited.vocab_limit = run.tokenizer->vocab_size();  // padded rows have no text to decode
  generate(run.model, ids, limited, recipe_device(run.recipe), [&](int32_t id) { emit(stream.push(id)); });
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
