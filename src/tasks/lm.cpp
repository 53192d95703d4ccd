#include "spread/tasks/lm.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>

#include "spread/data/corpus.h"
#include "spread/data/pairs.h"
#include "spread/diagnostics/probe.h"
#include "spread/eval/multiple_choice.h"
#include "spread/eval/perplexity.h"
#include "spread/tasks/encoder.h"
#include "spread/util/error.h"
#include "spread/util/random.h"

namespace spread {
namespace {

// Seeds of the fixed evaluation and probe batches, apart from the training stream.
constexpr uint64_t kEvalStream = 0xe7a1ULL;
constexpr uint64_t kProbeStream = 0x9e0bULL;

std::vector<Batch> fixed_batches(const TokenFile& tokens, int64_t block, int64_t batch_size, int64_t count,
                                 uint64_t seed) {
  WindowSampler sampler(tokens, block, seed);
  std::vector<Batch> batches;
  for (int64_t i = 0; i < count; ++i) batches.push_back(sampler.sample(batch_size, uint64_t(i)));
  return batches;
}

}  // namespace

std::vector<std::vector<int32_t>> probe_documents(const Recipe& recipe, const Tokenizer& tokenizer) {
  Documents docs;
  try {
    docs = load_documents(recipe.data, recipe.source);
  } catch (const UserError&) {
    return {};  // fewer than two documents
  }
  const std::string val = load_corpus(recipe.data, recipe.source).val;
  std::vector<std::vector<int32_t>> out;
  for (int64_t i : seeded_permutation(int64_t(docs.val.size()), uint64_t(recipe.run.seed), kProbeStream)) {
    if (int64_t(out.size()) == recipe.diagnostics.probe_texts) break;
    const std::string& text = docs.val[size_t(i)];
    if (val.find(text) == std::string::npos) continue;
    auto ids = tokenizer.encode(text);
    if (ids.size() < 2) continue;
    if (int64_t(ids.size()) > recipe.model.block_size) ids.resize(size_t(recipe.model.block_size));
    out.push_back(std::move(ids));
  }
  return out;
}

LanguageModelTask::LanguageModelTask(const Recipe& recipe, const std::string& run_dir, torch::Device device,
                                     const Note& note, const DataShard& shard)
    : recipe_(recipe), shard_(shard), device_(device), data_(prepare_data(recipe, run_dir, note)), loss_(make_lm_loss(recipe)) {
  const int64_t block = recipe.model.block_size;
  const auto seed = uint64_t(recipe.run.seed);
  std::vector<WeightedTokens> sources;
  for (const auto& train : data_.train) sources.push_back({train.tokens.get(), train.weight});
  sampler_ = std::make_unique<WindowSampler>(sources, block, seed);
  val_bytes_per_token_ = double(data_.val->source_bytes()) / double(data_.val->size());  // 0: unknown (shards)
  eval_batches_ = fixed_batches(*data_.val, block, recipe.train.batch_size, recipe.train.eval_batches,
                                splitmix64(seed ^ kEvalStream));
  if (recipe.diagnostics.enabled()) prepare_probe(note);
  read_choice_files(note);
}

void LanguageModelTask::read_choice_files(const Note& note) {
  for (const auto& path : recipe_.eval.choices) {
    std::string name = std::filesystem::path(path).stem().string();
    for (const auto& [other, items] : choices_)
      if (other == name)
        throw user_error(recipe_.source, 0, "eval.choices",
                         "two files are named '" + name + "', and their metrics would share a name",
                         "rename one of them");
    choices_.emplace_back(name, read_choices(path));
    note(fmt::format("eval: {} multiple-choice items of {}, logged as {}_acc and {}_acc_norm",
                     choices_.back().second.size(), path, name, name));
  }
}

void LanguageModelTask::prepare_probe(const Note& note) {
  if (!recipe_.data.sharded()) probe_docs_ = probe_documents(recipe_, *data_.tokenizer);
  if (probe_docs_.size() >= 2) {
    int64_t tokens = 0;
    for (const auto& d : probe_docs_) tokens += int64_t(d.size());
    note(fmt::format("diagnostics: probe of {} single val documents, {:.1f} tokens each on average",
                     probe_docs_.size(), double(tokens) / double(probe_docs_.size())));
    return;
  }
  probe_docs_.clear();
  const auto seed = uint64_t(recipe_.run.seed);
  probe_batch_ = fixed_batches(*data_.val, recipe_.model.block_size, recipe_.diagnostics.probe_texts, 1,
                               splitmix64(seed ^ kProbeStream))[0];
  note(!recipe_.data.sharded()
           ? "diagnostics: the corpus has no document boundaries (lines or blank-line paragraphs); probing windows"
           : "diagnostics: probing windows of the validation shards");
}

MicroStepLoss LanguageModelTask::micro_step(Transformer& model, int64_t step, int64_t micro, int64_t micro_steps) {
  const int64_t rows = recipe_.train.batch_size;
  Batch b = sampler_->sample(rows * shard_.world, uint64_t(step), uint64_t(micro));
  if (shard_.world > 1) b = {b.x.narrow(0, shard_.rank * rows, rows), b.y.narrow(0, shard_.rank * rows, rows)};
  if (!device_.is_cpu()) b = {b.x.to(device_), b.y.to(device_)};
  auto out = model->forward(b.x, loss_.needs_hidden(), loss_.needs_logits());
  LossValue v = loss_.compute({out, b, splitmix64(uint64_t(step) * 131 + uint64_t(micro))});
  (micro_steps == 1 ? v.total : v.total / double(micro_steps)).backward();
  return {v.total.item<double>(), v.parts};
}

Evaluation LanguageModelTask::evaluate(Transformer& model) {
  EvalResult e = evaluate_batches(model, eval_batches_, val_bytes_per_token_, device_);
  Evaluation out{{{"val_loss", e.loss}, {"val_ppl", e.ppl}},
                 fmt::format("val loss {:.4f}, perplexity {}", e.loss, format_perplexity(e.ppl))};
  if (std::isfinite(e.bpb)) {
    out.metrics["val_bpb"] = e.bpb;
    out.summary += fmt::format(", {:.4f} bits/byte", e.bpb);
  }
  for (const auto& [name, items] : choices_) {
    const ChoiceResult r = evaluate_choices(model, *data_.tokenizer, items, recipe_.train.batch_size, device_);
    out.metrics[name + "_acc"] = r.acc;
    out.metrics[name + "_acc_norm"] = r.acc_norm;
    out.summary += fmt::format(", {} acc {:.4f} acc_norm {:.4f}", name, r.acc, r.acc_norm);
  }
  return out;
}

nlohmann::json LanguageModelTask::probe(Transformer& model) {
  if (probe_docs_.empty())
    return probe_diagnostics(model, probe_batch_, recipe_.diagnostics, uint64_t(recipe_.run.seed), device_);
  std::vector<const std::vector<int32_t>*> docs;
  for (const auto& d : probe_docs_) docs.push_back(&d);
  return probe_sequences(model, docs, /*pad_id=*/0, recipe_, device_);  // padding is masked, the id is irrelevant
}

WorkPerStep LanguageModelTask::work_per_step() const {
  const auto& t = recipe_.train;
  return {"tok", t.batch_size * t.grad_accum * recipe_.model.block_size, "tokens_per_s"};
}

namespace {

// Every position of the block predicts the next token.
ActivationShape lm_activations(const Recipe& r, const MicroStepSizes& s) {
  return token_prediction_activations(s.batch, double(r.model.block_size), s.vocab, "model.block_size");
}

}  // namespace

extern const ObjectiveTraits kLanguageModelObjective{
    Objective::lm, "lm", "next-token prediction on plain text (LM pretraining; dispersion is one of its terms)",
    Inputs::text, Attention::causal, Head::next_token, lm_activations, make_task_of<LanguageModelTask>};

}  // namespace spread
