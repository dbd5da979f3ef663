// Internal to kernels/: the inline hash behind dropout_bits, shared with the attention kernel
// so its inner loops can inline it.
#pragma once

#include <cstdint>

namespace bertfit::detail {

inline constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ull;  // 2^64 / golden ratio, odd

// SplitMix64's output function (Stafford's "Mix13"): a bijection of 64-bit words with full
// avalanche.
inline std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The top 32 bits of the i-th SplitMix64 output for seed `key`.
inline std::uint32_t random_bits(std::uint64_t key, std::uint64_t i) {
  return static_cast<std::uint32_t>(mix64(key + (i + 1) * kGolden) >> 32);
}

// Element i is kept iff random_bits(key, i) >= keep_threshold(p); CHECKs 0 <= p < 1.
std::uint32_t keep_threshold(float p);

// The value a kept element is multiplied by, 1 / (1 - p), rounded as torch does.
float keep_scale(float p);

}  // namespace bertfit::detail
