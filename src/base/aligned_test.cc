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

// discard_pages releases whole pages only: the bytes around them keep their values, the pages
// read as zeros and can be written again.
TEST(AlignedBuffer, DiscardPagesZeroesWholePagesOnly) {
  const std::size_t n = 3 * kMapThreshold / sizeof(float);
  AlignedBuffer<float> b(n);
  for (std::size_t i = 0; i < n; ++i) b.data()[i] = 1.0f;
  // From 100 floats in to 100 floats before the end: every page but the first and last.
  const std::size_t bytes = discard_pages(b.data() + 100, sizeof(float) * (n - 200));
  const std::size_t page = 4096;
  EXPECT_EQ(bytes % page, 0u);
  EXPECT_GE(bytes, sizeof(float) * n - 2 * page);
  std::size_t zeros = 0;
  for (std::size_t i = 0; i < n; ++i) zeros += b.data()[i] == 0.0f;
  EXPECT_EQ(zeros * sizeof(float), bytes);
  EXPECT_EQ(b.data()[99], 1.0f);
  EXPECT_EQ(b.data()[n - 100], 1.0f);
  b.data()[n / 2] = 2.0f;
  EXPECT_EQ(b.data()[n / 2], 2.0f);
  EXPECT_EQ(discard_pages(b.data() + 1, 100), 0u);  // inside one page: nothing
}

}  // namespace
}  // namespace bertfit
