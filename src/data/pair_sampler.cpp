// PairBatchSampler (pairs.h): seeded epochs, no text in two examples of a batch.
#include <mutex>
#include <stdexcept>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "spread/data/pairs.h"

namespace spread {

struct PairBatchSampler::Cache {
  std::mutex mutex;
  std::shared_ptr<const std::vector<int64_t>> orders[2];
  uint64_t epochs[2] = {0, 0};
  int next = 0;  // slot to replace
};

PairBatchSampler::PairBatchSampler(const std::vector<PairExample>& examples, uint64_t seed)
    : seed_(seed), cache_(std::make_unique<Cache>()) {
  std::unordered_map<std::string_view, int32_t> ids;
  auto id = [&](const std::string& t) { return ids.emplace(t, static_cast<int32_t>(ids.size())).first->second; };
  text_begin_.reserve(examples.size() + 1);
  text_begin_.push_back(0);
  for (const auto& ex : examples) {
    text_ids_.push_back(id(ex.anchor));
    text_ids_.push_back(id(ex.positive));
    for (const auto& t : ex.negatives) text_ids_.push_back(id(t));
    text_begin_.push_back(static_cast<int64_t>(text_ids_.size()));
  }
}

PairBatchSampler::~PairBatchSampler() = default;
PairBatchSampler::PairBatchSampler(PairBatchSampler&&) noexcept = default;
PairBatchSampler& PairBatchSampler::operator=(PairBatchSampler&&) noexcept = default;

std::vector<int64_t> PairBatchSampler::epoch_order(uint64_t epoch) const { return *order(epoch); }

std::shared_ptr<const std::vector<int64_t>> PairBatchSampler::order(uint64_t epoch) const {
  std::lock_guard<std::mutex> lock(cache_->mutex);
  for (int s = 0; s < 2; ++s)
    if (cache_->orders[s] && cache_->epochs[s] == epoch) return cache_->orders[s];
  auto perm = std::make_shared<const std::vector<int64_t>>(seeded_permutation(size(), seed_, epoch));
  const int s = cache_->next;
  cache_->orders[s] = perm;
  cache_->epochs[s] = epoch;
  cache_->next = 1 - s;
  return perm;
}

std::vector<int64_t> PairBatchSampler::sample(int64_t batch_size, uint64_t step, uint64_t micro,
                                              int64_t micro_steps) const {
  if (batch_size < 1 || micro_steps < 1 || micro >= static_cast<uint64_t>(micro_steps))
    throw std::invalid_argument("PairBatchSampler::sample: needs batch_size >= 1 and 0 <= micro < micro_steps");
  const uint64_t n = static_cast<uint64_t>(size());
  std::vector<int64_t> batch;
  if (n == 0) return batch;
  const uint64_t position = (step * static_cast<uint64_t>(micro_steps) + micro) * static_cast<uint64_t>(batch_size);
  const uint64_t epoch = position / n, offset = position % n;
  std::unordered_set<int32_t> used;
  auto try_take = [&](int64_t i) {
    for (int64_t k = text_begin_[i]; k < text_begin_[i + 1]; ++k)
      if (used.count(text_ids_[k])) return;
    used.insert(text_ids_.begin() + text_begin_[i], text_ids_.begin() + text_begin_[i + 1]);
    batch.push_back(i);
  };
  // The rest of this epoch, then all of the next (which tries every example; from offset 0 one epoch already has).
  for (uint64_t pass = 0; pass < (offset == 0 ? 1u : 2u); ++pass) {
    const auto perm = order(epoch + pass);
    for (uint64_t j = pass == 0 ? offset : 0; j < n; ++j) {
      try_take((*perm)[j]);
      if (static_cast<int64_t>(batch.size()) == batch_size) return batch;
    }
  }
  return batch;
}

}  // namespace spread
