#include "spread/tasks/contrastive.h"

#include <ATen/CPUGeneratorImpl.h>
#include <algorithm>
#include <fmt/format.h>

#include "spread/diagnostics/alignment.h"
#include "spread/encode/embed.h"
#include "spread/model/eval_mode.h"
#include "spread/util/error.h"

namespace spread {
namespace {

// validation_batches' seed: fixed, not run.seed, so that runs of different seeds are scored on one set of batches
// (paired comparisons across seeds and arms).
constexpr uint64_t kValidationSeed = 0x5eed'0000'0000'0001ULL;

using Seqs = std::vector<const std::vector<int32_t>*>;

torch::Tensor embed_group(Transformer& model, const Seqs& seqs, const ContrastiveStepOptions& opt) {
  return embed_batch(model, pad_batch(seqs, opt.pad_id, opt.device), opt.pooling);
}

Seqs slice(const Seqs& seqs, int64_t first, int64_t count) {
  return Seqs(seqs.begin() + first, seqs.begin() + first + count);
}

torch::Tensor nce(const torch::Tensor& anchors, const torch::Tensor& candidates, const ContrastiveBatch& batch,
                  const ContrastiveStepOptions& opt) {
  return info_nce(anchors, candidates, opt.loss, batch.anchor_text_ids, batch.candidate_text_ids);
}

// loss.contrastive.gather: the global batch's anchors and candidates from every rank's embeddings. This rank's
// rows are its live tensors, so the gradient flows to them only; the other ranks' rows are constants. Candidates
// stay column by column, [positives of rank 0 .. of rank W-1, first negatives of rank 0 .., ...]: the layout of one
// process drawing the global batch, so labels (anchor i -> candidate i) and the hard negatives' per-query order are
// those of that process.
std::pair<torch::Tensor, torch::Tensor> gather_global(const torch::Tensor& anchors, const torch::Tensor& candidates,
                                                      const DataShard& shard) {
  const auto all_anchors = shard.all_gather(anchors), all_candidates = shard.all_gather(candidates);
  const int64_t b = anchors.size(0), columns = candidates.size(0) / b;
  std::vector<torch::Tensor> a, c;
  for (int64_t r = 0; r < shard.world; ++r) a.push_back(r == shard.rank ? anchors : all_anchors[r]);
  for (int64_t column = 0; column < columns; ++column)
    for (int64_t r = 0; r < shard.world; ++r)
      c.push_back((r == shard.rank ? candidates : all_candidates[r]).narrow(0, column * b, b));
  return {torch::cat(a), torch::cat(c)};
}

// InfoNCE of this rank's batch, or with a gather of the global batch (then every rank computes the same global
// loss; its gradient reaches each rank's parameters through that rank's rows only, so the loss is scaled by the
// world size to survive the trainer's averaging of gradients over ranks).
torch::Tensor batch_loss(const torch::Tensor& anchors, const torch::Tensor& candidates, const ContrastiveBatch& batch,
                         const ContrastiveStepOptions& opt, double& scale) {
  scale = opt.grad_scale;
  if (opt.gather == nullptr) return nce(anchors, candidates, batch, opt);
  scale *= double(opt.gather->world);
  auto [a, c] = gather_global(anchors, candidates, *opt.gather);
  return nce(a, c, batch, opt);
}

double cached_backward(Transformer& model, const ContrastiveBatch& batch, const ContrastiveStepOptions& opt) {
  Seqs all = batch.anchors;
  all.insert(all.end(), batch.candidates.begin(), batch.candidates.end());
  const auto n = int64_t(all.size()), n_anchors = int64_t(batch.anchors.size()), m = opt.mini_batch;
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  std::vector<torch::Tensor> states, embeddings;
  {
    torch::NoGradGuard no_grad;
    for (int64_t first = 0; first < n; first += m) {
      states.push_back(generator.get_state());
      embeddings.push_back(embed_group(model, slice(all, first, std::min(m, n - first)), opt));
    }
  }
  auto e = torch::cat(embeddings).detach().requires_grad_(true);
  double scale = 1.0;
  auto loss = batch_loss(e.narrow(0, 0, n_anchors), e.narrow(0, n_anchors, n - n_anchors), batch, opt, scale);
  (scale == 1.0 ? loss : loss * scale).backward();
  const auto grad = e.grad();
  for (size_t chunk = 0; chunk < states.size(); ++chunk) {
    const int64_t first = int64_t(chunk) * m, count = std::min(m, n - first);
    generator.set_state(states[chunk]);  // the same dropout masks as in the first pass
    embed_group(model, slice(all, first, count), opt).backward(grad.narrow(0, first, count));
  }
  return loss.item<double>();
}

}  // namespace

double contrastive_backward(Transformer& model, const ContrastiveBatch& batch, const ContrastiveStepOptions& opt) {
  if (opt.mini_batch > 0) return cached_backward(model, batch, opt);
  double scale = 1.0;
  auto loss = batch_loss(embed_group(model, batch.anchors, opt), embed_group(model, batch.candidates, opt), batch, opt,
                         scale);
  (scale == 1.0 ? loss : loss * scale).backward();
  return loss.item<double>();
}

ContrastiveTask::ContrastiveTask(const Recipe& recipe, const std::string& run_dir, torch::Device device,
                                 const Note& note, const DataShard& shard)
    : recipe_(recipe), shard_(shard), device_(device), evaluations_(recipe, note) {
  const auto& c = recipe.loss.contrastive;
  if (c.simcse && recipe.model.dropout <= 0)
    throw user_error(recipe.source, 0, "model.dropout", "loss.contrastive.simcse needs dropout: with 0 the positive "
                     "is the anchor itself", "set model.dropout = 0.1");
  if (c.mini_batch > 0 && !device.is_cpu() && recipe.model.dropout > 0)
    throw user_error(recipe.source, 0, "loss.contrastive.mini_batch", "cached mode replays the CPU generator only, "
                     "so with dropout on another device its gradient would not be exact", "use model.dropout = 0 there");
  PairSet pairs = load_recipe_pairs(recipe, note);
  tokenizer_ = prepare_encoder_tokenizer(recipe, run_dir, pair_texts(pairs.train), note);
  texts_ = std::make_unique<TextTable>([this](const std::string& text) {
    return tokenize_texts(*tokenizer_, {text}, text_length(recipe_)).front();
  });
  train_ = index_examples(pairs.train);
  val_ = index_examples(pairs.val);
  sampler_ = std::make_unique<PairBatchSampler>(pairs.train, uint64_t(recipe.run.seed));
  val_batches_ = validation_batches(pairs.val, recipe.train.batch_size, recipe.train.eval_batches);
  note(fmt::format("data: {} train / {} val pairs, {} hard negative(s) each, {} distinct texts of at most {} tokens",
                   train_.size(), val_.size(), train_.front().negatives.size(), texts_->size(), text_length(recipe)));
  step_options_.loss = {c.temperature, c.symmetric, c.matryoshka_dims};
  check_contrastive_options(step_options_.loss, recipe.model.n_embd);
  step_options_.pooling = parse_pooling(c.pooling);
  step_options_.pad_id = tokenizer_->special_ids().pad;
  step_options_.mini_batch = c.mini_batch;
  step_options_.device = device;
}

std::vector<ContrastiveTask::Example> ContrastiveTask::index_examples(const std::vector<PairExample>& examples) {
  std::vector<Example> out;
  for (const auto& e : examples) {
    Example x{texts_->add(e.anchor), texts_->add(e.positive), {}};
    for (const auto& n : e.negatives) x.negatives.push_back(texts_->add(n));
    out.push_back(std::move(x));
  }
  return out;
}

ContrastiveBatch ContrastiveTask::make_batch(const std::vector<Example>& set, const std::vector<int64_t>& picked,
                                             const std::vector<int64_t>& ids_of) const {
  const bool simcse = recipe_.loss.contrastive.simcse;
  std::vector<int64_t> anchor_ids, candidate_ids;
  ContrastiveBatch b;
  auto add = [&](Seqs& seqs, std::vector<int64_t>& ids, int32_t text) {
    seqs.push_back(&(*texts_)[text]);
    ids.push_back(text);
  };
  for (int64_t i : picked) add(b.anchors, anchor_ids, set[size_t(i)].anchor);
  for (int64_t i : picked) add(b.candidates, candidate_ids, simcse ? set[size_t(i)].anchor : set[size_t(i)].positive);
  const size_t negatives = simcse ? 0 : set[size_t(picked.front())].negatives.size();
  for (size_t k = 0; k < negatives; ++k)
    for (int64_t i : picked) add(b.candidates, candidate_ids, set[size_t(i)].negatives[k]);
  if (recipe_.loss.contrastive.mask_duplicates && &ids_of != &picked) {
    ContrastiveBatch global = make_batch(set, ids_of);
    b.anchor_text_ids = global.anchor_text_ids;
    b.candidate_text_ids = global.candidate_text_ids;
  } else if (recipe_.loss.contrastive.mask_duplicates) {
    b.anchor_text_ids = torch::tensor(anchor_ids, torch::kLong).to(device_);
    b.candidate_text_ids = torch::tensor(candidate_ids, torch::kLong).to(device_);
  }
  return b;
}

MicroStepLoss ContrastiveTask::micro_step(Transformer& model, int64_t step, int64_t micro, int64_t micro_steps) {
  const auto global =
      sampler_->sample(recipe_.train.batch_size * shard_.world, uint64_t(step), uint64_t(micro), micro_steps);
  // A short global batch (no other example fits without a repeated text) is cut to equal shards.
  const auto rows = int64_t(global.size()) / shard_.world;
  const std::vector<int64_t> picked(global.begin() + shard_.rank * rows, global.begin() + (shard_.rank + 1) * rows);
  ContrastiveStepOptions opt = step_options_;
  opt.grad_scale = micro_steps == 1 ? 1.0 : 1.0 / double(micro_steps);
  const bool gather = recipe_.loss.contrastive.gather && shard_.world > 1;
  if (gather) opt.gather = &shard_;
  const std::vector<int64_t> whole(global.begin(), global.begin() + rows * shard_.world);
  const double loss = contrastive_backward(model, gather ? make_batch(train_, picked, whole) : make_batch(train_, picked),
                                           opt);
  return {loss, {{"contrastive", loss}}};
}

std::vector<std::vector<int64_t>> validation_batches(const std::vector<PairExample>& val, int64_t batch_size,
                                                     int64_t max_batches) {
  if (val.size() < 2) return {};
  const PairBatchSampler sampler(val, kValidationSeed);
  const auto n = std::min(max_batches, std::max<int64_t>(1, int64_t(val.size()) / batch_size));
  std::vector<std::vector<int64_t>> batches;
  for (int64_t k = 0; k < n; ++k) {
    auto picked = sampler.sample(batch_size, uint64_t(k), 0, 1);
    if (picked.size() >= 2) batches.push_back(std::move(picked));
  }
  return batches;
}

Evaluation ContrastiveTask::evaluate(Transformer& model) {
  torch::NoGradGuard no_grad;
  EvalModeGuard eval_mode(model);
  double sum = 0;
  int64_t batches = 0;
  for (const auto& picked : val_batches_) {
    ContrastiveBatch batch = make_batch(val_, picked);
    sum += nce(embed_group(model, batch.anchors, step_options_), embed_group(model, batch.candidates, step_options_),
               batch, step_options_).item<double>();
    ++batches;
  }
  const double loss = batches > 0 ? sum / double(batches) : std::nan("");
  Evaluation e{{{"val_loss", loss}}, fmt::format("val contrastive loss {:.4f}", loss)};
  evaluations_.run(model, *tokenizer_, encoder_spec(recipe_, device_), e);
  return e;
}

nlohmann::json ContrastiveTask::probe(Transformer& model) {
  const auto n = std::min<int64_t>(recipe_.diagnostics.probe_texts, int64_t(val_.size()));
  Seqs anchors, positives;
  for (int64_t i = 0; i < n; ++i) {
    anchors.push_back(&(*texts_)[val_[size_t(i)].anchor]);
    positives.push_back(&(*texts_)[val_[size_t(i)].positive]);
  }
  nlohmann::json line = probe_sequences(model, anchors, step_options_.pad_id, recipe_, device_);
  torch::Tensor ea, ep;
  {
    torch::NoGradGuard no_grad;
    EvalModeGuard eval_mode(model);
    ea = embed_group(model, anchors, step_options_).to(torch::kCPU);
    ep = embed_group(model, positives, step_options_).to(torch::kCPU);
  }
  line["align"] = alignment(ea, ep);
  line["uniform"] = uniformity(ea);
  return line;
}

WorkPerStep ContrastiveTask::work_per_step() const {
  return {"pairs", recipe_.train.batch_size * recipe_.train.grad_accum, "pairs_per_s"};
}

namespace {

// Anchor, positive and negatives of every pair in one pass, or one chunk of them in the cached mode.
ActivationShape contrastive_activations(const Recipe& r, const MicroStepSizes& s) {
  double texts = s.batch * (2 + s.negatives);
  if (r.loss.contrastive.mini_batch > 0) texts = std::min(texts, double(r.loss.contrastive.mini_batch));
  ActivationShape a;
  a.tokens = texts * s.text_length;
  a.sequence_length = s.text_length;
  a.length_keys = {"data.max_length"};
  a.other_remedy = "set loss.contrastive.mini_batch (the cached mode needs one chunk's memory)";
  return a;
}

}  // namespace

extern const ObjectiveTraits kContrastiveObjective{
    Objective::contrastive, "contrastive",
    "InfoNCE on pooled embeddings of pairs (in-batch and hard negatives, optionally cached)", Inputs::pairs,
    Attention::either, Head::none, contrastive_activations, make_task_of<ContrastiveTask>};

}  // namespace spread
