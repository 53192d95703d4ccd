#include "spread/tasks/mlm.h"

#include <fmt/format.h>

#include "spread/data/corpus.h"
#include "spread/data/loader.h"
#include "spread/data/pairs.h"
#include "spread/encode/embed.h"
#include "spread/eval/perplexity.h"
#include "spread/losses/mlm.h"
#include "spread/model/eval_mode.h"
#include "spread/util/error.h"
#include "spread/util/random.h"

namespace spread {
namespace {

// Streams of the training batches, their masks, and the fixed evaluation masks and probe, apart from each other.
constexpr uint64_t kBatchStream = 0xba7c4ULL;
constexpr uint64_t kMaskStream = 0x3a5cULL;
constexpr uint64_t kEvalStream = 0xe7a1ULL;
constexpr uint64_t kProbeStream = 0x9e0bULL;

uint64_t stream_seed(uint64_t seed, uint64_t stream, uint64_t step, uint64_t micro) {
  return splitmix64(seed ^ splitmix64(stream ^ splitmix64(step * 0x100000001b3ULL + micro)));
}

// `count` documents drawn uniformly with replacement (training batches).
std::vector<const std::vector<int32_t>*> pick(const std::vector<std::vector<int32_t>>& docs, int64_t count,
                                              uint64_t seed) {
  std::vector<const std::vector<int32_t>*> out;
  uint64_t state = seed;
  for (int64_t i = 0; i < count; ++i) out.push_back(&docs[(state = splitmix64(state)) % docs.size()]);
  return out;
}

// Documents [first, first + count) of a fixed seeded order without repeats (evaluation, probe).
std::vector<const std::vector<int32_t>*> fixed(const std::vector<std::vector<int32_t>>& docs,
                                               const std::vector<int64_t>& order, int64_t first, int64_t count) {
  std::vector<const std::vector<int32_t>*> out;
  for (int64_t i = first; i < std::min<int64_t>(first + count, int64_t(order.size())); ++i)
    out.push_back(&docs[size_t(order[size_t(i)])]);
  return out;
}

}  // namespace

MaskedLanguageModelTask::MaskedLanguageModelTask(const Recipe& recipe, const std::string& run_dir,
                                                 torch::Device device, const Note& note, const DataShard& shard)
    : recipe_(recipe), shard_(shard), device_(device), evaluations_(recipe, note) {
  Documents docs = load_documents(recipe.data, recipe.source);
  tokenizer_ = prepare_encoder_tokenizer(recipe, run_dir, docs.train, note);
  if (!tokenizer_->special_ids().present())
    throw user_error(recipe.source, 0, "train.init_from", "the tokenizer of that run has no [MASK] id",
                     "masked-LM pretraining needs a tokenizer built for an encoder objective (mlm, contrastive)");
  train_ = tokenize_texts(*tokenizer_, docs.train, text_length(recipe));
  val_ = tokenize_texts(*tokenizer_, docs.val, text_length(recipe));
  note(fmt::format("data: {} train documents, {} val documents (texts of at most {} tokens)", train_.size(),
                   val_.size(), text_length(recipe)));
}

std::pair<torch::Tensor, int64_t> MaskedLanguageModelTask::batch_loss(
    Transformer& model, const std::vector<const std::vector<int32_t>*>& docs, uint64_t seed) const {
  TextBatch batch = pad_batch(docs, tokenizer_->special_ids().pad, torch::kCPU);
  MlmBatch m = mask_tokens(batch.ids, batch.mask, tokenizer_->special_ids(), recipe_.loss.mlm.mask_prob, seed);
  auto mask = batch.mask.to(device_);
  auto targets = m.targets.to(device_);
  // Only valid tokens are ever masked, so the loss reads no padding row.
  auto out = model->forward(m.inputs.to(device_), /*want_hidden=*/false, /*want_logits=*/false, mask,
                            /*pack_padding=*/true);
  // An imported BERT has its prediction head (transform, decoder bias); spread's own encoder the tied embedding.
  auto loss = model->config().compat.mlm_transform
                  ? mlm_loss(out.final_hidden, targets, [&](const torch::Tensor& h) { return model->output_logits(h); })
                  : mlm_loss(out.final_hidden, model->wte->weight, targets);
  return {loss, m.targets.ge(0).sum().item<int64_t>()};
}

MicroStepLoss MaskedLanguageModelTask::micro_step(Transformer& model, int64_t step, int64_t micro,
                                                  int64_t micro_steps) {
  const auto seed = uint64_t(recipe_.run.seed);
  const int64_t rows = recipe_.train.batch_size;
  auto docs = pick(train_, rows * shard_.world, stream_seed(seed, kBatchStream, uint64_t(step), uint64_t(micro)));
  docs = std::vector<const std::vector<int32_t>*>(docs.begin() + shard_.rank * rows,
                                                   docs.begin() + (shard_.rank + 1) * rows);
  // Each rank masks its own rows with its own stream (one process: micro * 1 + 0 = micro, as before).
  const auto mask_micro = uint64_t(micro * shard_.world + shard_.rank);
  auto [loss, chosen] = batch_loss(model, docs, stream_seed(seed, kMaskStream, uint64_t(step), mask_micro));
  (micro_steps == 1 ? loss : loss / double(micro_steps)).backward();
  const double value = loss.item<double>();
  return {value, {{"mlm", value}}};
}

Evaluation MaskedLanguageModelTask::evaluate(Transformer& model) {
  torch::NoGradGuard no_grad;
  EvalModeGuard eval_mode(model);
  const auto seed = uint64_t(recipe_.run.seed);
  double sum = 0;
  int64_t chosen_total = 0;
  const auto order = seeded_permutation(int64_t(val_.size()), seed, kEvalStream);
  const auto b = recipe_.train.batch_size;
  for (int64_t i = 0; i < recipe_.train.eval_batches && i * b < int64_t(val_.size()); ++i) {
    auto docs = fixed(val_, order, i * b, b);
    auto [loss, chosen] = batch_loss(model, docs, stream_seed(seed, kEvalStream ^ kMaskStream, uint64_t(i), 0));
    sum += loss.item<double>() * double(chosen);
    chosen_total += chosen;
  }
  const double loss = sum / double(std::max<int64_t>(chosen_total, 1));
  Evaluation e{{{"val_loss", loss}, {"val_ppl", std::exp(loss)}},
               fmt::format("val masked-LM loss {:.4f} (perplexity {})", loss, format_perplexity(std::exp(loss)))};
  evaluations_.run(model, *tokenizer_, encoder_spec(recipe_, device_), e);
  return e;
}

nlohmann::json MaskedLanguageModelTask::probe(Transformer& model) {
  const auto order = seeded_permutation(int64_t(val_.size()), uint64_t(recipe_.run.seed), kProbeStream);
  auto docs = fixed(val_, order, 0, recipe_.diagnostics.probe_texts);
  return probe_sequences(model, docs, tokenizer_->special_ids().pad, recipe_, device_);
}

WorkPerStep MaskedLanguageModelTask::work_per_step() const {
  return {"texts", recipe_.train.batch_size * recipe_.train.grad_accum, "texts_per_s"};
}

namespace {

// Logits are computed at the chosen positions only (mask_prob of them); the estimate counts every position: an
// upper bound.
ActivationShape mlm_activations(const Recipe&, const MicroStepSizes& s) {
  return token_prediction_activations(s.batch, s.text_length, s.vocab, "data.max_length");
}

}  // namespace

extern const ObjectiveTraits kMaskedLanguageModelObjective{
    Objective::mlm, "mlm", "masked-token prediction on plain text (BERT-style encoder pretraining)",
    Inputs::text, Attention::bidirectional, Head::masked_token, mlm_activations,
    make_task_of<MaskedLanguageModelTask>};

}  // namespace spread
