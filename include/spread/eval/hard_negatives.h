#pragma once
// Hard-negative mining by exact search, with the rules of sentence-transformers' mine_hard_negatives (docs/design.md,
// "Hard-negative mining"), so that the same embeddings and options give the same negatives:
//   1. each query scores every corpus document by cosine; the top K = range_max + (the most positives any query
//      has) are the candidates, by score, highest first;
//   2. a candidate is disqualified when it is one of the query's positives, when score + absolute_margin > p, when
//      score > p * (1 - relative_margin) (p: the query's lowest positive score, the hardest positive), when
//      score > max_score or when score < min_score;
//   3. of the qualified candidates in score order, positions [range_min, range_max) remain;
//   4. "top" takes the first num_negatives of them; "random" draws num_negatives of the first
//      max(remaining, num_negatives) positions (seeded) and orders them by score;
//   5. a query with fewer than num_negatives qualified negatives there gets none (the n-tuple output keeps only
//      complete rows).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>
#include <torch/types.h>

namespace spread {

struct HardNegativeOptions {
  int64_t num_negatives = 3;
  int64_t range_min = 0;
  std::optional<int64_t> range_max;  // unset: sentence-transformers' default (default_range_max)
  std::optional<double> max_score, min_score, absolute_margin, relative_margin;
  std::string sampling = "top";  // "top" | "random"
  uint64_t seed = 0;             // "random" only
};

// sentence-transformers' default for an unset range_max: range_min + num_negatives + max_positives, and
// 10 * num_negatives instead of num_negatives when a margin or max_score may disqualify candidates.
int64_t default_range_max(const HardNegativeOptions& options, int64_t max_positives);

// UserError when the options are out of range or do not fit a corpus of `documents` (the message names the option
// and the largest value that fits).
void check_hard_negative_options(const HardNegativeOptions& options, int64_t max_positives, int64_t documents);

struct MinedNegatives {
  std::vector<int64_t> corpus_index;  // num_negatives corpus rows, highest score first; empty when too few qualified
  std::vector<float> score;
};

// `queries` [Q, C] and `corpus` [D, C]: L2-normalised float32 embeddings; positives[q]: the corpus rows of query
// q's positives (at least one each). Scores by blocks of queries on all threads; `progress(done, Q)` after each
// block. Checks the options first (check_hard_negative_options).
std::vector<MinedNegatives> mine_hard_negatives(const torch::Tensor& queries, const torch::Tensor& corpus,
                                                const std::vector<std::vector<int64_t>>& positives,
                                                const HardNegativeOptions& options,
                                                const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace spread
