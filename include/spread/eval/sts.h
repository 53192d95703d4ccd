#pragma once
// Semantic textual similarity (docs/design.md §8.2): the Spearman rank correlation between the model's cosine
// similarities and the gold scores. Spearman's rho is Pearson's correlation of the two rank vectors, with tied
// values sharing their mean rank; it equals scipy.stats.spearmanr(x, y).statistic (to a few ulp, checked in
// tests/test_sts.cpp against a fixture written by tests/oracles/gen_eval_fixtures.py).
// Undefined cases give NaN as scipy does: one side constant, or a NaN anywhere in the input. Infinities are ranked
// as ordinary values (scipy 1.10 returns NaN when +inf and -inf meet, as its NaN check sums the input; not copied).
#include <vector>

namespace spread {

// Ranks 1..n in input order; tied values share the mean of the ranks they occupy (scipy.stats.rankdata, method
// 'average'). All NaN when any value is NaN (rankdata's nan_policy 'propagate'). O(n log n).
std::vector<double> average_ranks(const std::vector<double>& v);

// Spearman's rho of paired values; in [-1, 1]. Throws std::invalid_argument when the sizes differ or there are
// fewer than two pairs.
double spearman(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace spread
