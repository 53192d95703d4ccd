#pragma once
// The few pseudo-random and hashing primitives spread's reproducibility rests on, written out so that a seed gives
// the same numbers on every standard library and platform (std::uniform_int_distribution and std::hash do not).
#include <cstdint>
#include <random>
#include <string_view>

namespace spread {

// splitmix64's finalizer (Steele, Lea and Flood 2014): a bijective mix of 64 bits, used to derive independent
// streams from (seed, step, micro-step) without any state to save.
constexpr uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Uniform in [0, bound) by rejection of the low 2^64 mod bound values, which would bias r % bound.
inline uint64_t draw_below(std::mt19937_64& gen, uint64_t bound) {
  const uint64_t threshold = (0 - bound) % bound;
  while (true) {
    const uint64_t r = gen();
    if (r >= threshold) return r % bound;
  }
}

// 64-bit FNV-1a: a stable fingerprint of a text (ranks compare their recipes by it).
constexpr uint64_t fnv1a64(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : text) h = (h ^ uint64_t(static_cast<unsigned char>(c))) * 0x100000001b3ULL;
  return h;
}

}  // namespace spread
