#pragma once
// Flat hash maps for the vocabularies: token text -> id (keys in one arena, open addressing) and an id pair ->
// (merge rank, merged id). One probe sequence per lookup, no per-key allocation: a BPE or WordPiece encode does a
// lookup per candidate sub-word, so this is the model's inner loop.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace spread::hf {

inline uint64_t hash_bytes(std::string_view s) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (s.size() * 0xFF51AFD7ED558CCDull);
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t v;
    std::memcpy(&v, s.data() + i, 8);
    h = (h ^ v) * 0xC2B2AE3D27D4EB4Full;
    h ^= h >> 29;
  }
  uint64_t v = 0;
  std::memcpy(&v, s.data() + i, s.size() - i);
  h = (h ^ v) * 0xC2B2AE3D27D4EB4Full;
  h ^= h >> 32;
  return h;
}

class VocabMap {
 public:
  // False when `key` is already there.
  bool insert(std::string_view key, int32_t id);
  int32_t find(std::string_view key) const;  // -1 when absent
  size_t size() const { return ids_.size(); }

 private:
  void grow();
  std::string arena_;
  std::vector<uint32_t> offset_, length_;
  std::vector<int32_t> ids_;
  std::vector<int32_t> slots_;  // entry index + 1, 0 = empty
};

struct MergeValue {
  int32_t rank;
  int32_t id;
};

class MergeMap {
 public:
  void insert(int32_t a, int32_t b, MergeValue v);
  const MergeValue* find(int32_t a, int32_t b) const;
  size_t size() const { return count_; }

 private:
  static uint64_t key(int32_t a, int32_t b) { return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b); }
  void grow();
  std::vector<uint64_t> keys_;
  std::vector<MergeValue> values_;
  std::vector<uint8_t> used_;
  size_t count_ = 0;
};

}  // namespace spread::hf
