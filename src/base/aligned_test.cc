// AlignedBuffer: zeroed, aligned storage from malloc (small) or the kernel (large).
#include "base/aligned.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>

namespace bertfit {
namespace {

bool aligned(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % kAlignment == 0; }

TEST(AlignedBuffer, SmallAndLargeBuffersAreZeroedAlignedAndWritable) {
  for (std::size_t n : {std::size_t{1}, std::size_t{1000}, kMapThreshold / 4 - 1, kMapThreshold / 4,
                        std::size_t{3} << 20}) {
    AlignedBuffer<float> b(n);
    ASSERT_EQ(b.size(), n);
    EXPECT_TRUE(aligned(b.data())) << n;
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(b[i], 0.0f) << n << " at " << i;
    for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<float>(i);
    EXPECT_EQ(b[n - 1], static_cast<float>(n - 1));
    b.zero();
    EXPECT_EQ(b[n - 1], 0.0f);
  }
}

TEST(AlignedBuffer, ResizeGivesZeroedStorageAcrossTheMappingThreshold) {
  AlignedBuffer<std::uint16_t> b(10);
  b[9] = 7;
  b.resize(kMapThreshold);  // mapped
  EXPECT_EQ(b[9], 0);
  b[kMapThreshold - 1] = 5;
  b.resize(16);  // malloc again
  EXPECT_EQ(b.size(), 16u);
  EXPECT_EQ(b[15], 0);
  b.resize(0);
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(b.data(), nullptr);
}

TEST(AlignedBuffer, MoveTransfersOwnership) {
  AlignedBuffer<float> a(kMapThreshold);
  a[3] = 2.5f;
  float* p = a.data();
  AlignedBuffer<float> b(std::move(a));
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(b[3], 2.5f);
  EXPECT_EQ(a.size(), 0u);  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  AlignedBuffer<float> c(4);
  c = std::move(b);
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(c.size(), kMapThreshold);
}

}  // namespace
}  // namespace bertfit
