// The vectorised fp32 -> bf16 cast against the scalar definition in base/dtype.h, on
// special values (ties, NaN, infinities, subnormals, the largest finite values) and random
// bit patterns, over awkward lengths and an unaligned start.
#include "kernels/cast.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "base/dtype.h"

namespace bertfit {
namespace {

TEST(Cast, MatchesScalarRoundingOnEveryKindOfValue) {
  std::vector<float> values = {0.0f,
                               -0.0f,
                               1.0f,
                               -1.0f,
                               1.00390625f /* tie, rounds to even */,
                               1.01171875f /* tie, rounds up */,
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN(),
                               std::numeric_limits<float>::denorm_min(),
                               std::numeric_limits<float>::max(),
                               std::numeric_limits<float>::lowest()};
  std::mt19937 rng(5);
  for (int i = 0; i < 100000; ++i)
    values.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(rng())));
  for (std::int64_t n : std::vector<std::int64_t>{1, 7, 63, 64, 65, 767, 768, 769,
                                                  static_cast<std::int64_t>(values.size() - 1)}) {
    std::vector<std::uint16_t> out(n + 1);
    cast_f32_to_bf16(out.data() + 1, values.data() + 1, n);  // unaligned views
    for (std::int64_t i = 1; i <= n; ++i) {
      const float v = values[i];
      if (std::isnan(v)) {
        EXPECT_TRUE(std::isnan(bf16_to_f32(out[i]))) << i;
      } else {
        ASSERT_EQ(out[i], f32_to_bf16(v)) << "value " << v << " at " << i;
      }
    }
  }
}

// The scalar definition itself (base/dtype.h, which the cast above shares) against rounding
// worked out independently: of the two bf16 values around x (its truncation and the next one
// away from zero, which past the largest finite bf16 is infinity), the nearer, ties to the
// even one; NaN stays NaN with its sign.
TEST(Cast, ScalarDefinitionRoundsToNearestTiesToEven) {
  std::vector<std::uint32_t> bits = {0x00000000u, 0x80000000u, 0x3f808000u, 0x3f818000u,
                                     0x3f808001u, 0x7f7fffffu, 0xff7fffffu, 0x7f7f8000u,
                                     0x7f7f7fffu, 0x00000001u, 0x807fffffu, 0x7f800000u,
                                     0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u};
  std::mt19937 rng(7);
  for (int i = 0; i < 1000000; ++i) bits.push_back(static_cast<std::uint32_t>(rng()));
  const auto value = [](std::uint16_t h) -> double {
    if ((h & 0x7fffu) == 0x7f80u) return (h & 0x8000u) ? -0x1p128 : 0x1p128;  // as if unbounded
    return static_cast<double>(bf16_to_f32(h));
  };
  for (std::uint32_t u : bits) {
    const float x = std::bit_cast<float>(u);
    const std::uint16_t got = f32_to_bf16(x);
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(bf16_to_f32(got))) << std::hex << u;
      EXPECT_EQ(got & 0x8000u, (u >> 16) & 0x8000u) << std::hex << u;
      continue;
    }
    const auto lo = static_cast<std::uint16_t>(u >> 16);
    if ((lo & 0x7fffu) == 0x7f80u) {  // infinity
      EXPECT_EQ(got, lo);
      continue;
    }
    const auto hi = static_cast<std::uint16_t>(lo + 1);
    const double d_lo = std::fabs(static_cast<double>(x) - value(lo));
    const double d_hi = std::fabs(value(hi) - static_cast<double>(x));
    const std::uint16_t want = d_lo < d_hi ? lo : d_hi < d_lo ? hi : ((lo & 1u) ? hi : lo);
    ASSERT_EQ(got, want) << std::hex << "bits 0x" << u;
  }
}

TEST(Cast, ErrorIsAtMostHalfAnUlpOfBf16) {
  // bf16 keeps 8 significant bits (7 stored): an ulp is 2^(e-7) for |x| in [2^e, 2^(e+1)), so
  // rounding to nearest errs by at most half of it, 2^(e-8) <= 2^-8 |x|.
  std::mt19937 rng(6);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> x(4096);
  for (auto& v : x) v = d(rng);
  std::vector<std::uint16_t> out(x.size());
  cast_f32_to_bf16(out.data(), x.data(), static_cast<std::int64_t>(x.size()));
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_LE(std::fabs(bf16_to_f32(out[i]) - x[i]), std::ldexp(std::fabs(x[i]), -8));
  }
}

}  // namespace
}  // namespace bertfit
