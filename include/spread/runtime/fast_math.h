#pragma once
// Elementwise float functions written to vectorize: no calls, no branches, so the loops that use them compile
// to AVX-512 / AVX2 code (runtime/vectorize.h). For kernels of spread's own; LibTorch's operators have theirs.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace spread {

// e^x, exactly 0 below -87 (and at -inf), NaN for NaN; for x <= 0 (softmax arguments, Gaussian tails; valid up to
// x ~ 88). Reduction x = n ln2 + r with |r| <= ln2 / 2 and the degree-6 Taylor polynomial of e^r: relative error
// about 2.5e-7 (two float ulps).
inline float exp_nonpositive(float x) {
  constexpr float kShift = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer kept in the low mantissa
  const float xc = std::max(x, -87.0f);
  const float shifted = xc * 1.44269504088896341f + kShift;
  const float n = shifted - kShift;
  const float r = (xc - n * 0.693145751953125f) - n * 1.42860682030941723e-6f;  // ln 2 in two parts
  float p = 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  uint32_t bits;  // unsigned: no overflow (undefined for int) whatever the input, NaN included
  std::memcpy(&bits, &shifted, sizeof bits);
  const uint32_t exponent = (bits - 0x4B400000u + 127u) << 23;  // 2^n as float bits, n in [-126, 0]
  float scale;
  std::memcpy(&scale, &exponent, sizeof scale);
  return x < -87.0f ? 0.0f : p * scale;
}

// erfc(z) for z >= 0 (Numerical Recipes' erfcc, fractional error < 1.2e-7 in exact arithmetic). In float: relative
// error ~5e-7 on [0, 1], ~2e-6 up to z = 5, ~8e-6 near z = 9, and 0 beyond z ~ 9.26 (erfc < 1e-38 there).
inline float erfc_nonnegative(float z) {
  const float t = 1.0f / (1.0f + 0.5f * z);
  float p = 0.17087277f;
  p = p * t - 0.82215223f;
  p = p * t + 1.48851587f;
  p = p * t - 1.13520398f;
  p = p * t + 0.27886807f;
  p = p * t - 0.18628806f;
  p = p * t + 0.09678418f;
  p = p * t + 0.37409196f;
  p = p * t + 1.00002368f;
  p = p * t - 1.26551223f;
  return t * exp_nonpositive(p - z * z);
}

// The standard normal CDF Phi(x) = erfc(-x / sqrt 2) / 2, from the tail that keeps it accurate on both sides
// (GELU x Phi(x) from it: relative error below 2e-5 even in the far negative tail, ~1e-6 where |x| < 7).
inline float normal_cdf(float x) {
  const float tail = 0.5f * erfc_nonnegative(std::abs(x) * 0.70710678118654752f);
  return x >= 0 ? 1.0f - tail : tail;
}

}  // namespace spread
