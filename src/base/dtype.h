// Element types and conversions: f32 and bf16 (round-to-nearest-even), plus f16 -> f32 for
// reading half-precision checkpoints.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace bertfit {

enum class DType { kF32, kBF16 };

inline float bf16_to_f32(std::uint16_t h) { return std::bit_cast<float>(std::uint32_t{h} << 16); }

// Written without branches so that loops over it vectorise (comm/'s bf16 wire conversions and
// reduction operator, kernels/cast.h).
inline std::uint16_t f32_to_bf16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;                      // quiet NaN stays NaN
  const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;  // nearest, ties to even
  return static_cast<std::uint16_t>(nan ? ((u >> 16) | 0x40u) : rounded);
}

// IEEE half -> float, exact for every value including subnormals, inf and NaN.
inline float f16_to_f32(std::uint16_t h) {
  std::uint32_t sign = (std::uint32_t{h} & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | ((127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

}  // namespace bertfit
