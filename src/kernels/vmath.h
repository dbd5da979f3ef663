// Internal to kernels/: exp, erf and tanh for float written without branches or library calls,
// so that loops calling them vectorise (libm's expf/erff/tanhf are opaque scalar calls).
// Polynomials are near-minimax (Chebyshev) fits computed with mpmath. Measured over every
// float (exhaustive sweeps against double libm): vexp <= 1.10 ulp (subnormal results
// included), verf <= 1.37 ulp, vtanh <= 1.29 ulp; glibc's expf/erff/tanhf are <= ~1 ulp.
// vmath_test.cc re-checks a dense subsample.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace bertfit::detail {

// p(r) = Σ c[k] r^k by Horner with fused multiply-adds; c is highest degree first. Unrolled
// at compile time (a loop here would stop the caller's loop from vectorising).
template <std::size_t N, std::size_t... K>
inline float horner_unrolled(const float (&c)[N], float r, std::index_sequence<K...>) {
  float p = c[0];
  ((p = std::fma(p, r, c[K + 1])), ...);
  return p;
}
template <std::size_t N>
inline float horner(const float (&c)[N], float r) {
  return horner_unrolled(c, r, std::make_index_sequence<N - 1>{});
}

// e^x. x = n·ln2 + r with |r| <= ln2/2; e^r by a degree-6 fit (max error 2e-9); 2^n applied
// as two exact power-of-two factors so that results in the subnormal range round once.
// Overflows to +inf above ~88.72, underflows to 0 below ~-103.97, NaN stays NaN.
inline float vexp(float x) {
  constexpr float kLog2e = 1.442695022e+00f;
  constexpr float kLn2Hi = 6.931471825e-01f;   // float(ln 2)
  constexpr float kLn2Lo = -1.904654212e-09f;  // ln 2 - kLn2Hi
  constexpr float kShifter = 12582912.0f;      // 1.5·2^23: adding it rounds to an integer
  static constexpr float kC[] = {1.394110843e-03f, 8.375126398e-03f, 4.166635290e-02f,
                                 1.666641551e-01f, 5.000000047e-01f, 1.000000038e+00f,
                                 1.000000000e+00f};
  x = x < -104.0f ? -104.0f : x;  // comparisons keep NaN
  x = x > 89.0f ? 89.0f : x;
  const float shifted = std::fma(x, kLog2e, kShifter);
  const float n = shifted - kShifter;  // round(x / ln 2), exactly an integer in [-151, 129]
  float r = std::fma(-n, kLn2Hi, x);
  r = std::fma(-n, kLn2Lo, r);
  const float p = horner(kC, r);
  const std::int32_t ni = static_cast<std::int32_t>(std::bit_cast<std::uint32_t>(shifted) -
                                                    std::bit_cast<std::uint32_t>(kShifter));
  const std::int32_t n1 = ni >> 1;  // n = n1 + n2, both in [-76, 65]: 2^n1, 2^n2 are normal
  const std::int32_t n2 = ni - n1;
  const float s1 = std::bit_cast<float>(static_cast<std::uint32_t>(n1 + 127) << 23);
  const float s2 = std::bit_cast<float>(static_cast<std::uint32_t>(n2 + 127) << 23);
  return p * s1 * s2;
}

// erf(z). |z| < 1: z·P(z²), degree-6 fit of erf(z)/z (max error 1.2e-9). 1 <= |z| < 4:
// 1 - e^{-z²}·Q(z), Q = erfc·e^{z²} fitted in x = (2|z| - 5)/3 on [-1, 1] (degree 11, max
// error 1e-8). |z| >= 4: ±1 (erfc(4) < 2^-26 rounds away).
inline float verf(float z) {
  // P(s) = c0 + s·P1(s); c0 (≈ 2/√π) is split into float hi + lo so that it does not
  // contribute its own rounding (0.9u) to the result.
  static constexpr float kSmall[] = {7.875875063e-05f,  -8.016864287e-04f, 5.189087423e-03f,
                                     -2.685421201e-02f, 1.128359472e-01f,  -3.761262667e-01f};
  constexpr float kC0Hi = 1.128379107e+00f;
  constexpr float kC0Lo = 5.932674441e-08f;
  static constexpr float kTail[] = {-3.566417877e-05f, 9.629120195e-05f,  -1.474161429e-04f,
                                    3.681510979e-04f,  -1.013662598e-03f, 2.425638938e-03f,
                                    -5.568837646e-03f, 1.248412315e-02f,  -2.700545821e-02f,
                                    5.611094756e-02f,  -1.115210179e-01f, 2.108063577e-01f};
  const float a = std::fabs(z);
  const float s = z * z;
  const float small = std::fma(z, kC0Hi, std::fma(z, kC0Lo, z * (s * horner(kSmall, s))));
  const float x = (a < 4.0f ? 2.0f * a - 5.0f : 3.0f) * (1.0f / 3.0f);
  const float erfc = vexp(-s) * horner(kTail, x);
  const float big = std::copysign(a >= 4.0f ? 1.0f : 1.0f - erfc, z);  // NaN: 1 - NaN
  return a < 1.0f ? small : big;
}

// tanh(x). |x| < 1: x·T(x²), degree-7 fit of tanh(x)/x (max error 4.3e-9); otherwise
// 1 - 2/(e^{2|x|} + 1) with the sign restored (exact ±1 once e^{2|x|} overflows).
inline float vtanh(float x) {
  static constexpr float kSmall[] = {-3.523280944e-04f, 2.278647665e-03f,  -7.912485059e-03f,
                                     2.146141016e-02f,  -5.386970672e-02f, 1.333213931e-01f,
                                     -3.333327738e-01f, 9.999999956e-01f};
  const float a = std::fabs(x);
  const float small = x * horner(kSmall, x * x);
  const float big = std::copysign(1.0f - 2.0f / (vexp(2.0f * a) + 1.0f), x);
  return a < 1.0f ? small : big;
}

}  // namespace bertfit::detail
