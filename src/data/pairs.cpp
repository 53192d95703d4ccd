// Pair data: one of the sources (pair_files.cpp, pair_sources.cpp), then the validation split without shared texts.
// The batch sampler is pair_sampler.cpp, the STS evaluation file sts_files.cpp; pairs.h states the promises.
#include "spread/data/pairs.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string_view>
#include <unordered_set>

#include "pair_reading.h"
#include "spread/util/csv.h"
#include "spread/util/error.h"
#include "spread/util/random.h"

namespace spread {
using namespace pair_reading;
namespace {

// Stream of the validation split's shuffle; epochs of the sampler use streams 0, 1, 2, ...
constexpr uint64_t kSplitStream = ~0ULL;

// Moves `all` into out.train / out.val: the first ceil(fraction * n) of a seeded permutation go to val (both keep
// file order), then train examples that share a text with val are dropped.
void split(std::vector<PairExample> all, const PairSourceSpec& spec, PairSet& out) {
  const int64_t n = static_cast<int64_t>(all.size());
  // The relative slack keeps 0.1 * 30 (= 3.0000000000000004 in doubles) at 3.
  const int64_t n_val = std::min<int64_t>(n, static_cast<int64_t>(std::ceil(spec.val_fraction * n * (1 - 1e-12))));
  const std::vector<int64_t> order = seeded_permutation(n, spec.seed, kSplitStream);
  std::vector<char> in_val(n, 0);
  for (int64_t i = 0; i < n_val; ++i) in_val[order[i]] = 1;

  std::unordered_set<std::string_view> val_texts;
  for (int64_t i = 0; i < n; ++i) {
    if (!in_val[i]) continue;
    val_texts.insert(all[i].anchor);
    val_texts.insert(all[i].positive);
    for (const auto& t : all[i].negatives) val_texts.insert(t);
  }
  std::vector<char> keep(n, 0);
  for (int64_t i = 0; i < n; ++i) {
    if (in_val[i]) continue;
    bool shared = val_texts.count(all[i].anchor) || val_texts.count(all[i].positive);
    for (const auto& t : all[i].negatives) shared = shared || val_texts.count(t);
    keep[i] = !shared;
    out.dropped_for_overlap += shared;
  }
  val_texts.clear();  // views into `all`, which is moved from next
  for (int64_t i = 0; i < n; ++i) {
    if (in_val[i]) out.val.push_back(std::move(all[i]));
    else if (keep[i]) out.train.push_back(std::move(all[i]));
  }
}

}  // namespace

std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed, uint64_t stream) {
  std::vector<int64_t> perm(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (int64_t i = 0; i < n; ++i) perm[i] = i;
  std::mt19937_64 gen(splitmix64(seed ^ splitmix64(stream)));
  for (int64_t i = n - 1; i > 0; --i) std::swap(perm[i], perm[draw_below(gen, static_cast<uint64_t>(i) + 1)]);
  return perm;
}

PairSet load_pairs(const PairSourceSpec& spec) {
  if (!(spec.val_fraction >= 0 && spec.val_fraction < 1))
    throw user_error(spec.recipe_file, 0, "data.val_fraction",
                     "must be in [0, 1), got " + std::to_string(spec.val_fraction));
  if (!spec.columns.empty() && spec.source != "pairs")
    throw user_error(spec.recipe_file, 0, "data.columns", "only source 'pairs' reads columns",
                     "remove data.columns for source '" + spec.source + "'");
  BadRows bad(spec.strict, "data.path",
              std::string("fix or remove the row, or set data.strict = false") +
                  (spec.recipe_file.empty() ? "" : " in " + spec.recipe_file) + " to skip bad rows");
  Loaded loaded;
  if (spec.source == "pairs") loaded = load_pair_files(spec, bad);
  else if (spec.source == "wordnet_pairs") loaded = load_wordnet_pairs(spec);
  else if (spec.source == "stsb") loaded = load_stsb(spec, bad);
  else if (spec.source == "sick") loaded = load_sick(spec, bad);
  else if (spec.source == "beir") loaded = load_beir_pairs(spec, bad);
  else
    throw user_error(spec.recipe_file, 0, "data.source", "unknown pair source '" + spec.source + "'",
                     "use pairs, wordnet_pairs, stsb, sick or beir");

  PairSet out;
  out.bad_rows = bad.count();
  out.bad_row_messages = bad.messages();
  if (loaded.examples.empty()) {
    std::string problem = "no usable examples in " + join(spec.paths, ", ");
    if (bad.count() > 0)
      problem += " (" + count_of(bad.count(), "bad row", "bad rows") + ", first: " + bad.messages()[0] + ")";
    throw user_error(spec.recipe_file, 0, "data.path", problem);
  }
  const int64_t total = static_cast<int64_t>(loaded.examples.size());
  split(std::move(loaded.examples), spec, out);
  if (out.train.empty())
    throw user_error(spec.recipe_file, 0, "data.val_fraction",
                     "no training example is left of " + thousands(total) + " (" + thousands(out.dropped_for_overlap) +
                         " share a text with the " + thousands(static_cast<int64_t>(out.val.size())) + " val examples)",
                     "lower data.val_fraction");

  out.description = loaded.what;
  if (bad.count() > 0) out.description += ", " + count_of(bad.count(), "bad row", "bad rows") + " skipped";
  out.description += "; train " + thousands(static_cast<int64_t>(out.train.size())) + ", val " +
                     thousands(static_cast<int64_t>(out.val.size()));
  if (out.dropped_for_overlap > 0)
    out.description +=
        " (" + thousands(out.dropped_for_overlap) + " train examples dropped: they share a text with val)";
  return out;
}

std::vector<std::string> pair_texts(const std::vector<PairExample>& examples) {
  std::vector<std::string> texts;
  std::unordered_set<std::string_view> seen;
  auto add = [&](const std::string& t) {
    if (seen.insert(t).second) texts.push_back(t);
  };
  for (const auto& ex : examples) {
    add(ex.anchor);
    add(ex.positive);
    for (const auto& t : ex.negatives) add(t);
  }
  return texts;
}

}  // namespace spread
