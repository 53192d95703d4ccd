// Open-addressing maps of vocab.h (linear probing, load factor <= 1/2).
#include "vocab.h"

namespace spread::hf {

bool VocabMap::insert(std::string_view key, int32_t id) {
  if (find(key) >= 0) return false;
  if ((ids_.size() + 1) * 2 > slots_.size()) grow();
  offset_.push_back(static_cast<uint32_t>(arena_.size()));
  length_.push_back(static_cast<uint32_t>(key.size()));
  arena_.append(key);
  ids_.push_back(id);
  const size_t mask = slots_.size() - 1;
  size_t s = hash_bytes(key) & mask;
  while (slots_[s] != 0) s = (s + 1) & mask;
  slots_[s] = static_cast<int32_t>(ids_.size());
  return true;
}

int32_t VocabMap::find(std::string_view key) const {
  if (slots_.empty()) return -1;
  const size_t mask = slots_.size() - 1;
  size_t s = hash_bytes(key) & mask;
  while (slots_[s] != 0) {
    const size_t e = slots_[s] - 1;
    if (length_[e] == key.size() && std::memcmp(arena_.data() + offset_[e], key.data(), key.size()) == 0)
      return ids_[e];
    s = (s + 1) & mask;
  }
  return -1;
}

void VocabMap::grow() {
  const size_t n = slots_.empty() ? 64 : slots_.size() * 2;
  slots_.assign(n, 0);
  for (size_t e = 0; e < ids_.size(); ++e) {
    size_t s = hash_bytes(std::string_view(arena_.data() + offset_[e], length_[e])) & (n - 1);
    while (slots_[s] != 0) s = (s + 1) & (n - 1);
    slots_[s] = static_cast<int32_t>(e + 1);
  }
}

static size_t mix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xFF51AFD7ED558CCDull;
  k ^= k >> 33;
  return static_cast<size_t>(k);
}

void MergeMap::insert(int32_t a, int32_t b, MergeValue v) {
  if ((count_ + 1) * 2 > keys_.size()) grow();
  const uint64_t k = key(a, b);
  const size_t mask = keys_.size() - 1;
  size_t s = mix(k) & mask;
  while (used_[s] && keys_[s] != k) s = (s + 1) & mask;
  if (used_[s]) {  // a repeated pair: the later line wins, as in the crate's map collected in file order
    values_[s] = v;
    return;
  }
  used_[s] = 1;
  keys_[s] = k;
  values_[s] = v;
  ++count_;
}

const MergeValue* MergeMap::find(int32_t a, int32_t b) const {
  if (keys_.empty()) return nullptr;
  const uint64_t k = key(a, b);
  const size_t mask = keys_.size() - 1;
  size_t s = mix(k) & mask;
  while (used_[s]) {
    if (keys_[s] == k) return &values_[s];
    s = (s + 1) & mask;
  }
  return nullptr;
}

void MergeMap::grow() {
  const size_t n = keys_.empty() ? 64 : keys_.size() * 2;
  std::vector<uint64_t> old_keys = std::move(keys_);
  std::vector<MergeValue> old_values = std::move(values_);
  std::vector<uint8_t> old_used = std::move(used_);
  keys_.assign(n, 0);
  values_.assign(n, {});
  used_.assign(n, 0);
  count_ = 0;
  for (size_t i = 0; i < old_keys.size(); ++i)
    if (old_used[i]) insert(static_cast<int32_t>(old_keys[i] >> 32), static_cast<int32_t>(old_keys[i] & 0xFFFFFFFF), old_values[i]);
}

}  // namespace spread::hf
