#include "spread/tasks/maxsim.h"

#include <fmt/format.h>

#include "spread/eval/multi_vector_retrieval.h"
#include "spread/losses/maxsim.h"
#include "spread/model/eval_mode.h"
#include "spread/util/error.h"

namespace spread {
namespace {

using Seqs = std::vector<const std::vector<int32_t>*>;

TokenBatch on_device(TokenBatch b, const torch::Device& device) {
  if (device.is_cpu()) return b;
  return {b.ids.to(device), b.attend.to(device), b.score.to(device)};
}

// loss.maxsim.gather: the global batch's token vectors [W rows, T, H] and score masks from every rank, padded to the
// longest rank's T (padding never scores). This rank's rows are its live tensor, the others' constants; rank order
// keeps the layout of one process with the global batch (query i's documents at i N .. i N + N - 1).
std::pair<torch::Tensor, torch::Tensor> gather_tokens(const torch::Tensor& vectors, const torch::Tensor& score,
                                                      const DataShard& shard) {
  const int64_t t = vectors.size(1);
  const int64_t longest = shard.all_gather(torch::tensor({t}, torch::kLong)).max().item<int64_t>();
  auto v = torch::constant_pad_nd(vectors, {0, 0, 0, longest - t});
  auto m = torch::constant_pad_nd(score.to(torch::kUInt8), {0, longest - t});  // Gloo gathers no bool
  const auto all_v = shard.all_gather(v), all_m = shard.all_gather(m);
  std::vector<torch::Tensor> rows;
  for (int64_t r = 0; r < shard.world; ++r) rows.push_back(r == shard.rank ? v : all_v[r]);
  return {torch::cat(rows), all_m.flatten(0, 1).to(torch::kBool)};
}

}  // namespace

MaxSimLoss maxsim_step(Transformer& model, const MaxSimBatch& batch, const MaxSimStepOptions& opt) {
  auto q = encode_tokens(model, batch.queries);
  auto d = encode_tokens(model, batch.documents);
  auto q_score = batch.queries.score, d_score = batch.documents.score;
  double scale = opt.grad_scale;
  if (opt.gather != nullptr) {
    // Every rank computes the same global loss; its gradient reaches a rank's parameters through that rank's rows
    // only, so it is scaled by the world size to survive the averaging of gradients over ranks.
    std::tie(q, q_score) = gather_tokens(q, q_score, *opt.gather);
    std::tie(d, d_score) = gather_tokens(d, d_score, *opt.gather);
    scale *= double(opt.gather->world);
  }
  MaxSimLoss loss;
  loss.full = maxsim_contrastive_loss(maxsim_scores(q, q_score, d, d_score), opt.temperature);
  loss.total = loss.full;
  if (opt.pooling_aware) {
    const WardBatch assignment =
        ward_pool_batch(d.detach(), d_score, WardBudget::pool_factor(opt.pool_factor), opt.ward);
    auto pooled = pooled_with_gradient(d, d_score, assignment, opt.ste);
    auto mask = assignment.mask.to(pooled.device());
    loss.pooled = maxsim_contrastive_loss(maxsim_scores(q, q_score, pooled, mask), opt.temperature);
    loss.total = opt.weight_full * loss.full + opt.weight_pooled * loss.pooled;
  }
  if (scale != 0) (scale == 1.0 ? loss.total : loss.total * scale).backward();
  return loss;
}

namespace {

// PyLate's rule for its skiplist_words: each word's id by convert_tokens_to_ids, that is the entry's, else [UNK]'s.
std::vector<bool> skiplist_ids(const Tokenizer& tokenizer, const Recipe& recipe) {
  std::vector<bool> skip(size_t(tokenizer.vocab_size()), false);
  for (const auto& word : recipe.loss.maxsim.skiplist_words) {
    auto id = tokenizer.entry_id(word);
    if (!id) id = tokenizer.entry_id("[UNK]");
    if (!id || *id < 0 || *id >= tokenizer.vocab_size())
      throw user_error(recipe.source, 0, "loss.maxsim.skiplist_words",
                       "'" + word + "' is no entry of the vocabulary, which has no [UNK] either",
                       "list entries of the run's tokenizer");
    skip[size_t(*id)] = true;
  }
  return skip;
}

}  // namespace

MultiVectorSpec multi_vector_spec(const Recipe& recipe, const Tokenizer& tokenizer, const torch::Device& device) {
  const auto& m = recipe.loss.maxsim;
  MultiVectorSpec spec;
  spec.query_length = m.query_length;
  spec.document_length = m.document_length;
  spec.query_expansion = m.query_expansion;
  if (m.skiplist) spec.skip = m.skiplist_words.empty() ? punctuation_ids(tokenizer) : skiplist_ids(tokenizer, recipe);
  spec.batch_size = std::max<int64_t>(recipe.train.batch_size, 32);
  spec.device = device;
  return spec;
}

MaxSimStepOptions maxsim_step_options(const Recipe& recipe) {
  const auto& p = recipe.loss.pooling_aware;
  MaxSimStepOptions opt;
  opt.temperature = recipe.loss.maxsim.temperature;
  opt.pooling_aware = p.enabled;
  opt.pool_factor = p.pool_factor;
  opt.weight_full = p.weight_full;
  opt.weight_pooled = p.weight_pooled;
  opt.ste = parse_ward_ste(p.ste);
  opt.ward.protected_tokens = p.protected_tokens;
  opt.ward.distance = parse_ward_distance(p.ward_distance);
  return opt;
}

MaxSimTask::MaxSimTask(const Recipe& recipe, const std::string& run_dir, torch::Device device, const Note& note,
                       const DataShard& shard)
    : recipe_(recipe), shard_(shard), device_(device), step_options_(maxsim_step_options(recipe)) {
  PairSet pairs = load_recipe_pairs(recipe, note);
  tokenizer_ = prepare_encoder_tokenizer(recipe, run_dir, pair_texts(pairs.train), note);
  if (tokenizer_->kind() == "hf" && !tokenizer_->special_ids().has_markers())
    throw user_error(recipe.source, 0, "tokenizer.query_marker",
                     "the run's tokenizer is a Hugging Face vocabulary (kind hf), which names no [Q] / [D] ids",
                     "set tokenizer.query_marker and document_marker to two entries of it (BERT's \"[unused0]\" "
                     "and \"[unused1]\")");
  if (!tokenizer_->special_ids().has_markers())
    throw user_error(recipe.source, 0, recipe.train.init_from.empty() ? "tokenizer" : "train.init_from",
                     "the run's tokenizer has no [Q] / [D] ids (it was built before spread reserved them)",
                     "pretrain the backbone again with this version of spread");
  spec_ = multi_vector_spec(recipe, *tokenizer_, device);
  queries_ = std::make_unique<TextTable>([this](const std::string& t) { return query_tokens(*tokenizer_, t, spec_); });
  documents_ =
      std::make_unique<TextTable>([this](const std::string& t) { return document_tokens(*tokenizer_, t, spec_); });
  train_ = index_examples(pairs.train);
  val_ = index_examples(pairs.val);
  sampler_ = std::make_unique<PairBatchSampler>(pairs.train, uint64_t(recipe.run.seed));
  note(fmt::format("data: {} train / {} val pairs, {} hard negative(s) each; {} queries of at most {} tokens, {} "
                   "documents of at most {}", train_.size(), val_.size(), train_.front().negatives.size(),
                   queries_->size(), spec_.query_length, documents_->size(), spec_.document_length));
  if (!recipe.eval.beir.empty()) {
    beir_ = load_beir(recipe.eval.beir, recipe.eval.qrels);
    note(fmt::format("eval: BEIR {} ({} documents, {} queries, {})", recipe.eval.beir, beir_->corpus_ids.size(),
                     beir_->query_ids.size(), beir_->qrels_file));
  }
}

std::vector<MaxSimTask::Example> MaxSimTask::index_examples(const std::vector<PairExample>& examples) {
  std::vector<Example> out;
  for (const auto& e : examples) {
    Example x{queries_->add(e.anchor), documents_->add(e.positive), {}};
    for (const auto& n : e.negatives) x.negatives.push_back(documents_->add(n));
    out.push_back(std::move(x));
  }
  return out;
}

MaxSimBatch MaxSimTask::make_batch(const std::vector<Example>& set, const std::vector<int64_t>& picked) const {
  Seqs queries, documents;
  for (int64_t i : picked) {
    const Example& e = set[size_t(i)];
    queries.push_back(&(*queries_)[e.query]);
    documents.push_back(&(*documents_)[e.positive]);
    for (int32_t n : e.negatives) documents.push_back(&(*documents_)[n]);
  }
  const SpecialIds special = tokenizer_->special_ids();
  return {on_device(query_batch(queries, special, spec_), device_),
          on_device(document_batch(documents, special, spec_), device_)};
}

MicroStepLoss MaxSimTask::micro_step(Transformer& model, int64_t step, int64_t micro, int64_t micro_steps) {
  const auto global =
      sampler_->sample(recipe_.train.batch_size * shard_.world, uint64_t(step), uint64_t(micro), micro_steps);
  const auto rows = int64_t(global.size()) / shard_.world;  // a short global batch is cut to equal shards
  const std::vector<int64_t> picked(global.begin() + shard_.rank * rows, global.begin() + (shard_.rank + 1) * rows);
  MaxSimStepOptions opt = step_options_;
  opt.grad_scale = micro_steps == 1 ? 1.0 : 1.0 / double(micro_steps);
  if (recipe_.loss.maxsim.gather && shard_.world > 1) opt.gather = &shard_;
  MaxSimLoss loss = maxsim_step(model, make_batch(train_, picked), opt);
  MicroStepLoss out{loss.total.item<double>(), {{"maxsim", loss.full.item<double>()}}};
  if (loss.pooled.defined()) out.parts.push_back({"maxsim_pooled", loss.pooled.item<double>()});
  return out;
}

Evaluation MaxSimTask::evaluate(Transformer& model) {
  torch::NoGradGuard no_grad;
  EvalModeGuard eval_mode(model);
  MaxSimStepOptions opt = step_options_;
  opt.grad_scale = 0;
  double full = 0, pooled = 0;
  int64_t batches = 0;
  const auto b = recipe_.train.batch_size;
  for (int64_t first = 0; first + 1 < int64_t(val_.size()) && batches < recipe_.train.eval_batches; first += b) {
    std::vector<int64_t> picked;
    for (int64_t i = first; i < std::min<int64_t>(first + b, int64_t(val_.size())); ++i) picked.push_back(i);
    MaxSimLoss loss = maxsim_step(model, make_batch(val_, picked), opt);
    full += loss.full.item<double>();
    if (loss.pooled.defined()) pooled += loss.pooled.item<double>();
    ++batches;
  }
  const double n = batches > 0 ? double(batches) : std::nan("");
  Evaluation e{{{"val_loss", full / n}}, fmt::format("val MaxSim loss {:.4f}", full / n)};
  if (opt.pooling_aware) {
    e.metrics["val_loss_pooled"] = pooled / n;
    e.summary += fmt::format(" (pooled {:.4f})", pooled / n);
  }
  if (beir_) add_retrieval(model, e);
  return e;
}

void MaxSimTask::add_retrieval(Transformer& model, Evaluation& e) const {
  const double factor = recipe_.loss.pooling_aware.pool_factor;
  auto results = evaluate_multi_vector_retrieval(model, *tokenizer_, *beir_, spec_, {1.0, factor}, step_options_.ward);
  const RetrievalMetrics& r = results[0].metrics;
  e.metrics["ndcg@10"] = r.ndcg_at_10;
  e.metrics["mrr@10"] = r.mrr_at_10;
  e.metrics["recall@100"] = r.recall_at_100;
  e.metrics["ndcg@10_pooled"] = results[1].metrics.ndcg_at_10;
  e.metrics["vectors_per_doc"] = results[0].mean_vectors;
  e.metrics["vectors_per_doc_pooled"] = results[1].mean_vectors;
  e.summary += fmt::format(", nDCG@10 {:.4f} ({:.1f} vectors/doc), pooled x{:g} {:.4f} ({:.1f})", r.ndcg_at_10,
                           results[0].mean_vectors, factor, results[1].metrics.ndcg_at_10, results[1].mean_vectors);
}

nlohmann::json MaxSimTask::probe(Transformer& model) {
  const auto n = std::min<int64_t>(recipe_.diagnostics.probe_texts, int64_t(val_.size()));
  Seqs documents;
  for (int64_t i = 0; i < n; ++i) documents.push_back(&(*documents_)[val_[size_t(i)].positive]);
  return probe_sequences(model, documents, tokenizer_->special_ids().pad, recipe_, device_);
}

WorkPerStep MaxSimTask::work_per_step() const {
  return {"queries", recipe_.train.batch_size * recipe_.train.grad_accum, "queries_per_s"};
}

namespace {

// Queries and documents in one pass; the score tensor [queries, documents, query tokens, document tokens] is kept
// three times (scores, their maximum's gradient, the gradient) and once more per pooled copy.
ActivationShape maxsim_activations(const Recipe& r, const MicroStepSizes& s) {
  const auto& m = r.loss.maxsim;
  const double q = double(m.query_length), d = double(m.document_length);
  const double documents = s.batch * (1 + s.negatives) * (m.gather ? s.world : 1.0);
  ActivationShape a;
  a.tokens = s.batch * q + s.batch * (1 + s.negatives) * d;
  a.sequence_length = s.text_length;
  a.own_floats = 3 * s.batch * documents * q * d;
  if (r.loss.pooling_aware.enabled) a.own_floats *= 1 + 1 / r.loss.pooling_aware.pool_factor;
  a.own_floats += 2 * a.tokens * double(r.model.head_dim);
  a.length_keys = {"loss.maxsim.document_length", "loss.maxsim.query_length"};
  return a;
}

}  // namespace

extern const ObjectiveTraits kMaxSimObjective{
    Objective::maxsim, "maxsim",
    "late interaction: MaxSim over token vectors of pairs, optionally pooling-aware (ColBERT-style retrieval)",
    Inputs::pairs, Attention::bidirectional, Head::token_vectors, maxsim_activations, make_task_of<MaxSimTask>};

}  // namespace spread
