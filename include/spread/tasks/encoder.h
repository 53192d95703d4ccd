#pragma once
// What the encoder tasks (mlm, contrastive) share: the tokenizer with reserved ids, the text length, the fixed
// probe of single texts, and the [eval] sts / beir evaluations run at every evaluation step.
#include <memory>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "spread/data/beir.h"
#include "spread/data/pairs.h"
#include "spread/eval/encoder_eval.h"
#include "spread/tasks/task.h"

namespace spread {

// Tokens per text, [CLS] and [SEP] included: data.max_length, or model.block_size when it is 0.
int64_t text_length(const Recipe& recipe);

// The run's tokenizer: loaded from run_dir when it is there (resume, or copied by train.init_from), otherwise
// built from `training_texts` (tokenizer.kind, vocab_size) with the reserved ids of data/special_tokens.h.
std::shared_ptr<Tokenizer> prepare_encoder_tokenizer(const Recipe& recipe, const std::string& run_dir,
                                                     const std::vector<std::string>& training_texts, const Note& note);

EncoderSpec encoder_spec(const Recipe& recipe, const torch::Device& device);

// The recipe's pair data (data.source, path, columns, hard_negatives, val_fraction, seed), with a note per skipped
// row; UserError when fewer than two training pairs remain.
PairSet load_recipe_pairs(const Recipe& recipe, const Note& note);

// Distinct texts, each tokenised once by `tokenize`; equal texts share one id (ids count from 0 in first-seen order).
class TextTable {
 public:
  using Tokenize = std::function<std::vector<int32_t>(const std::string&)>;
  explicit TextTable(Tokenize tokenize) : tokenize_(std::move(tokenize)) {}
  int32_t add(const std::string& text);
  const std::vector<int32_t>& operator[](int32_t id) const { return seqs_[size_t(id)]; }
  int64_t size() const { return int64_t(seqs_.size()); }

 private:
  Tokenize tokenize_;
  std::unordered_map<std::string, int32_t> index_;
  std::vector<std::vector<int32_t>> seqs_;
};

// [eval] sts and beir, read once at the start (a missing or malformed file fails the start, not step 500).
class EncoderEvaluations {
 public:
  EncoderEvaluations(const Recipe& recipe, const Note& note);
  // Adds sts_spearman, ndcg@10, mrr@10, recall@100 to e (and to its summary).
  void run(Transformer& model, const Tokenizer& tokenizer, const EncoderSpec& spec, Evaluation& e) const;

 private:
  std::vector<StsPair> sts_;
  std::optional<BeirData> beir_;
};

// Geometry diagnostics of fixed single texts (diagnostics/probe.h), tokenised sequences padded into one batch.
nlohmann::json probe_sequences(Transformer& model, const std::vector<const std::vector<int32_t>*>& seqs, int32_t pad_id,
                               const Recipe& recipe, const torch::Device& device);

}  // namespace spread
