// The vectorised fp32 -> bf16 cast against the scalar definition in tensor/dtype.h, on
// special values (ties, NaN, infinities, subnormals, the largest finite values) and random
// bit patterns, over awkward lengths and an unaligned start.
#include "kernels/cast.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "tensor/dtype.h"

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
