#include "spread/tasks/encoder.h"

#include <filesystem>
#include <fmt/format.h>

#include "spread/data/special_tokens.h"
#include "spread/diagnostics/probe.h"
#include "spread/encode/embed.h"
#include "spread/util/error.h"

namespace fs = std::filesystem;

namespace spread {

int64_t text_length(const Recipe& recipe) {
  return recipe.data.max_length > 0 ? recipe.data.max_length : recipe.model.block_size;
}

std::shared_ptr<Tokenizer> prepare_encoder_tokenizer(const Recipe& recipe, const std::string& run_dir,
                                                     const std::vector<std::string>& training_texts, const Note& note) {
  if (fs::exists(fs::path(run_dir) / "tokenizer.json")) return load_tokenizer(run_dir);
  std::string text;
  for (const auto& t : training_texts) text += t + "\n";
  const TokenizerSpec spec = tokenizer_spec(recipe.tokenizer);
  auto base = build_tokenizer(spec, text, run_dir);
  // Appended ids would be unknown to the HF file that export writes as it is: the vocabulary must bring its own.
  if (spec.kind == "hf" && !base->special_ids().present())
    throw user_error(recipe.source, 0, "tokenizer.path", "'" + spec.hf_path + "' has no [PAD], [CLS], [SEP] and "
                     "[MASK] tokens, which encoder objectives need", "use a BERT-style vocabulary (e.g. "
                     "bert-base-uncased's), or tokenizer.kind = \"bpe\", which reserves them");
  std::shared_ptr<Tokenizer> tokenizer = with_special_tokens(std::move(base));
  tokenizer->save(run_dir);
  const SpecialIds s = tokenizer->special_ids();
  if (spec.kind == "hf")
    note(fmt::format("tokenizer: hf with {} ids from {} ([PAD] [CLS] [SEP] [MASK] = {} {} {} {}{}), saved in {}",
                     tokenizer->vocab_size(), spec.hf_path, s.pad, s.cls, s.sep, s.mask,
                     s.has_markers() ? fmt::format("; [Q] [D] = '{}' {}, '{}' {}", spec.query_marker, s.query,
                                                   spec.document_marker, s.document) : "", run_dir));
  else
    note(fmt::format("tokenizer: {} with {} ids (reserved [PAD] .. [D] = {}..{}), saved in {}", tokenizer->kind(),
                     tokenizer->vocab_size(), s.pad, tokenizer->vocab_size() - 1, run_dir));
  return tokenizer;
}

EncoderSpec encoder_spec(const Recipe& recipe, const torch::Device& device) {
  return {text_length(recipe), parse_pooling(recipe.loss.contrastive.pooling), std::max<int64_t>(recipe.train.batch_size, 32),
          device};
}

PairSet load_recipe_pairs(const Recipe& recipe, const Note& note) {
  PairSourceSpec spec;
  spec.source = recipe.data.source;
  spec.paths = recipe.data.path;
  spec.columns = recipe.data.columns;
  spec.strict = recipe.data.strict;
  spec.hard_negatives = recipe.data.hard_negatives;
  spec.beir_qrels = recipe.data.qrels;
  spec.val_fraction = recipe.data.val_fraction;
  spec.seed = uint64_t(recipe.run.seed);
  spec.recipe_file = recipe.source;
  PairSet pairs = load_pairs(spec);
  note("data: " + pairs.description);
  for (const auto& m : pairs.bad_row_messages) note("  skipped: " + m);
  if (pairs.train.size() < 2) throw user_error(recipe.source, 0, "data.path", "fewer than two training pairs");
  return pairs;
}

int32_t TextTable::add(const std::string& text) {
  auto [it, inserted] = index_.emplace(text, int32_t(seqs_.size()));
  if (inserted) seqs_.push_back(tokenize_(text));
  return it->second;
}

EncoderEvaluations::EncoderEvaluations(const Recipe& recipe, const Note& note) {
  if (!recipe.eval.sts.empty()) {
    sts_ = load_sts_csv(recipe.eval.sts);
    note(fmt::format("eval: STS {} ({} pairs)", recipe.eval.sts, sts_.size()));
  }
  if (!recipe.eval.beir.empty()) {
    beir_ = load_beir(recipe.eval.beir, recipe.eval.qrels);
    note(fmt::format("eval: BEIR {} ({} documents, {} queries, {})", recipe.eval.beir, beir_->corpus_ids.size(),
                     beir_->query_ids.size(), beir_->qrels_file));
  }
}

void EncoderEvaluations::run(Transformer& model, const Tokenizer& tokenizer, const EncoderSpec& spec,
                             Evaluation& e) const {
  if (!sts_.empty()) {
    StsScore s = evaluate_sts(model, tokenizer, sts_, spec);
    e.metrics["sts_spearman"] = s.spearman;
    e.summary += fmt::format(", STS Spearman {:.4f}", s.spearman);
  }
  if (beir_) {
    RetrievalMetrics r = evaluate_retrieval(model, tokenizer, *beir_, spec);
    e.metrics["ndcg@10"] = r.ndcg_at_10;
    e.metrics["mrr@10"] = r.mrr_at_10;
    e.metrics["recall@100"] = r.recall_at_100;
    e.summary += fmt::format(", nDCG@10 {:.4f}, MRR@10 {:.4f}, R@100 {:.4f}", r.ndcg_at_10, r.mrr_at_10, r.recall_at_100);
  }
}

nlohmann::json probe_sequences(Transformer& model, const std::vector<const std::vector<int32_t>*>& seqs, int32_t pad_id,
                               const Recipe& recipe, const torch::Device& device) {
  TextBatch batch = pad_batch(seqs, pad_id, torch::kCPU);
  return probe_text_diagnostics(model, batch.ids, batch.mask, recipe.diagnostics, uint64_t(recipe.run.seed), device);
}

}  // namespace spread
