// Precision casts for mixed-precision matrix products: fp32 -> bf16 with round-to-nearest-even
// (NaN stays NaN), the rounding tensor/dtype.h defines.
#pragma once

#include <cstdint>
#include <cstring>

namespace bertfit {

// out[i] = bf16(in[i]) for n elements; bf16 values are stored as their 16 upper bits.
void cast_f32_to_bf16(std::uint16_t* out, const float* in, std::int64_t n);

namespace detail {
// The bf16 of f: tensor/dtype.h's f32_to_bf16 written without branches, so that loops over it
// vectorise.
inline std::uint16_t bf16_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
  const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return static_cast<std::uint16_t>(nan ? ((u >> 16) | 0x40u) : rounded);
}
}  // namespace detail

}  // namespace bertfit
