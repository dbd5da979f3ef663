// Accuracy of the branch-free exp / erf / tanh (vmath.h) against double libm over a dense
// subsample of all floats, and their special values.
#include "kernels/vmath.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>

namespace bertfit::detail {
namespace {

// The spacing of floats at |v| (the float ulp), from the float nearest v.
double ulp_at(double v) {
  const float f = static_cast<float>(std::fabs(v));
  if (f == 0.0f) return std::ldexp(1.0, -149);
  return static_cast<double>(std::nextafter(f, std::numeric_limits<float>::infinity())) - f;
}

// Largest error in ulps over every 1021st float of either sign with |x| <= limit (about
// 4·10^6 points for limit 110), skipping results that overflow float.
double max_ulp_error(const std::function<float(float)>& fast,
                     const std::function<double(double)>& exact, float limit) {
  double worst = 0.0;
  const std::uint32_t top = std::bit_cast<std::uint32_t>(limit);
  for (std::uint32_t bits = 0; bits <= top; bits += 1021) {
    for (std::uint32_t sign : {0u, 0x80000000u}) {
      const float x = std::bit_cast<float>(bits | sign);
      const double want = exact(x);
      if (std::fabs(want) > std::numeric_limits<float>::max()) continue;
      worst = std::max(worst, std::fabs(fast(x) - want) / ulp_at(want));
    }
  }
  return worst;
}

// Bounds: the exhaustive maxima (1.10, 1.37, 1.29 ulp, see vmath.h) rounded up.
TEST(VMath, ExpWithinBound) {
  EXPECT_LE(max_ulp_error(
                vexp, [](double x) { return std::exp(x); }, 110.0f),
            1.15);
}

TEST(VMath, ErfWithinBound) {
  EXPECT_LE(max_ulp_error(
                verf, [](double x) { return std::erf(x); }, 6.0f),
            1.4);
}

TEST(VMath, TanhWithinBound) {
  EXPECT_LE(max_ulp_error(
                vtanh, [](double x) { return std::tanh(x); }, 50.0f),
            1.3);
}

TEST(VMath, SpecialValues) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(vexp(0.0f), 1.0f);
  EXPECT_EQ(vexp(-kInf), 0.0f);
  EXPECT_EQ(vexp(kInf), kInf);
  EXPECT_EQ(vexp(89.0f), kInf);
  EXPECT_GT(vexp(-100.0f), 0.0f);  // subnormal, not flushed
  EXPECT_TRUE(std::isnan(vexp(nan)));
  EXPECT_EQ(verf(0.0f), 0.0f);
  EXPECT_EQ(verf(kInf), 1.0f);
  EXPECT_EQ(verf(-kInf), -1.0f);
  EXPECT_TRUE(std::isnan(verf(nan)));
  EXPECT_EQ(vtanh(0.0f), 0.0f);
  EXPECT_EQ(vtanh(kInf), 1.0f);
  EXPECT_EQ(vtanh(-kInf), -1.0f);
  EXPECT_TRUE(std::isnan(vtanh(nan)));
}

}  // namespace
}  // namespace bertfit::detail
