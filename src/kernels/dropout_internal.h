// Internal to kernels/: the inline hash behind dropout_bits, and dropout's inner loop, shared by
// the kernels that drop as they go (dropout, the fused LayerNorm kernels, attention) so that
// their inner loops inline them.
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

// Drop(x) for the n elements starting at element `first` of stream `key`, as dropout_forward
// (p > 0): store(c, value) with value x[c] · scale if element first + c is kept, else 0.
// Branch-free, x loaded unconditionally, so that the loop (the hash in 8 64-bit lanes)
// vectorises; store may write over x[c].
template <class Store>
inline void drop_each(const float* x, std::int64_t n, std::uint64_t first, std::uint32_t threshold,
                      float scale, std::uint64_t key, Store&& store) {
  for (std::int64_t c = 0; c < n; ++c) {
    const bool keep = random_bits(key, first + static_cast<std::uint64_t>(c)) >= threshold;
    const float kept = x[c] * scale;
    store(c, keep ? kept : 0.0f);
  }
}

// drop_each into out (which may be x).
inline void drop_span(float* out, const float* x, std::int64_t n, std::uint64_t first,
                      std::uint32_t threshold, float scale, std::uint64_t key) {
  drop_each(x, n, first, threshold, scale, key, [out](std::int64_t c, float v) { out[c] = v; });
}

}  // namespace bertfit::detail
