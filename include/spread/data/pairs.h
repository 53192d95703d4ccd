#pragma once
// Pair data for contrastive training (sentence-transformers style): (anchor, positive, hard negatives...) examples
// from a file of pairs or a known dataset, a validation split that shares no text with training, and a batch
// sampler that never puts one text into two examples of a batch (an in-batch negative equal to a positive would be
// a false negative). Also the STS evaluation file reader.
//
// Sources (PairSourceSpec::source):
//   pairs          TSV / CSV with a header row, or JSONL (one object per line; its first object's keys act as the
//                  header), picked by extension. Columns: spec.columns = [anchor, positive, negative...], or when
//                  empty "anchor", "positive" and every column whose name starts with "negative", in file order.
//   wordnet_pairs  Debian's wordnet-base (spec.paths[0] = its folder, default /usr/share/wordnet):
//                  (definition, example sentence) for each example of a synset and ("lemma, lemma", definition).
//   stsb           STS-B CSV (no header; sentence1, sentence2, score in [0, 5]): the pairs with score >= 4.
//   sick           SICK.txt, SemEval_set TRAIN and TRIAL rows (TEST is for evaluation): ENTAILMENT pairs (A, B).
//                  Hard negatives: C when (A, C) is a CONTRADICTION pair, and A for C when SICK also marks
//                  B_contradicts_A (the first in file order). See PairSourceSpec::hard_negatives.
//   beir           a BEIR folder (see beir.h): (query, title + " " + text) for every relevant qrel.
//
// Promises:
// - every example of a PairSet has the same number of negatives (0 for wordnet_pairs, stsb and beir);
// - val and train share no text (anchor, positive or negative; exact string compare): train examples that share
//   one with val are dropped and counted;
// - a bad row (wrong field count, a needed field missing, empty or blank, invalid UTF-8, a JSON line that does not
//   parse or a field that is not a string, an unparsable score) is skipped and counted, or with strict = true is a
//   UserError naming the file, the line and the fix. A header that lacks a needed column, and an unreadable or empty
//   file, are always a UserError (keys data.columns, data.path);
// - the same spec gives the same PairSet on every platform (the shuffles use std::mt19937_64, whose output the
//   standard fixes, with our own index draw instead of std::shuffle / uniform_int_distribution).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace spread {

struct PairExample {
  std::string anchor, positive;
  std::vector<std::string> negatives;
};

struct PairSourceSpec {
  std::string source = "pairs";      // pairs | wordnet_pairs | stsb | sick | beir
  std::vector<std::string> paths;    // pairs: files (.tsv .csv .jsonl); stsb: CSV files; sick: SICK.txt;
                                     // beir: the folder; wordnet_pairs: the wordnet folder or nothing
  std::vector<std::string> columns;  // pairs only: names of [anchor, positive, negative...]; empty = by name
  bool strict = false;               // true: the first bad row is a UserError; false: skipped and counted
  // sick only. false: every ENTAILMENT pair, with one hard negative each only if every pair has one (on SICK's
  // TRAIN+TRIAL rows 310 of the 1,417 do, so none); true: only the pairs that have one, each with it.
  bool hard_negatives = false;
  std::string beir_qrels;     // beir only: qrels/<name>.tsv; empty = train.tsv, else the only file there
  double val_fraction = 0.1;  // in [0, 1): ceil(val_fraction * n) examples go to val
  uint64_t seed = 0;
  std::string recipe_file;  // names the recipe in errors (keys: data.path, data.columns, data.strict, ...)
};

struct PairSet {
  std::vector<PairExample> train, val;
  int64_t bad_rows = 0;                       // skipped rows
  std::vector<std::string> bad_row_messages;  // the first 5, each "FILE:LINE: problem"
  int64_t dropped_for_overlap = 0;            // train examples removed because they share a text with val
  std::string description;                    // one line for the run header
};

// Loads, splits and describes the examples of `spec`. Throws UserError for unusable input (see above).
PairSet load_pairs(const PairSourceSpec& spec);

// All distinct texts of the examples (anchors, positives, negatives) in first-seen order, for tokenizer training.
std::vector<std::string> pair_texts(const std::vector<PairExample>& examples);

// Deterministic batches without a text shared by two examples. The batch of (step, micro) depends only on the seed
// and those numbers, so resuming needs no sampler state:
//   walk the seeded permutation of epoch e = p / n from position p % n, where p = (step * micro_steps + micro) *
//   batch_size, continuing into epoch e + 1's permutation; take an example unless one of its texts is already in
//   the batch (texts compared exactly; an example's own texts may repeat among themselves); stop at batch_size
//   examples or at the end of epoch e + 1 (then every example has been tried, so a short batch means no other
//   example of the whole set fits).
// Keeps no reference to `examples`. Thread-safe; caches the two latest epoch permutations.
class PairBatchSampler {
 public:
  PairBatchSampler(const std::vector<PairExample>& examples, uint64_t seed);
  ~PairBatchSampler();
  PairBatchSampler(PairBatchSampler&&) noexcept;
  PairBatchSampler& operator=(PairBatchSampler&&) noexcept;

  // Indices into `examples`, in walk order.
  std::vector<int64_t> sample(int64_t batch_size, uint64_t step, uint64_t micro, int64_t micro_steps) const;
  // The permutation of 0..n-1 that epoch `epoch` walks.
  std::vector<int64_t> epoch_order(uint64_t epoch) const;
  int64_t size() const { return static_cast<int64_t>(text_begin_.size()) - 1; }

 private:
  struct Cache;
  std::shared_ptr<const std::vector<int64_t>> order(uint64_t epoch) const;

  uint64_t seed_;
  std::vector<int64_t> text_begin_;  // example i's text ids are text_ids_[text_begin_[i], text_begin_[i + 1])
  std::vector<int32_t> text_ids_;    // distinct texts numbered in first-seen order
  std::unique_ptr<Cache> cache_;
};

// A seeded permutation of 0..n-1: Fisher-Yates over std::mt19937_64 seeded with a splitmix64 mix of (seed, stream),
// indices drawn by rejection (no modulo bias), so the result is the same with every standard library.
std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed, uint64_t stream);

// --- STS evaluation files --------------------------------------------------------------------------------------

struct StsPair {
  std::string a, b;
  double score;
  int64_t line = 0;  // in the file, for messages (0 = unknown)
};

// An STS file: STS-B's CSV (no header, or a header whose third field is not a number; sentence1, sentence2, score),
// or SICK.txt (recognized by its tab-separated header; sentence_A, sentence_B, relatedness_score of the TEST rows).
// Evaluation data is never skipped silently: a bad row is a UserError naming the file and line.
std::vector<StsPair> load_sts_csv(const std::string& path);

}  // namespace spread
