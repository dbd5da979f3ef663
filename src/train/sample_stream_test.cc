// SampleStream: the stream is a sequence of permutations of the examples; with length grouping
// each run of `group` samples holds the same examples as without grouping, sorted longest first.
#include "train/sample_stream.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace bertfit {
namespace {

TEST(SampleStream, GroupedRunsAreSortedPermutationsOfTheUngroupedRuns) {
  const std::int64_t n = 1003, group = 96;
  std::mt19937 rng(5);
  std::vector<int> lengths(n);
  for (int& l : lengths) l = 3 + static_cast<int>(rng() % 120);
  SampleStream plain(n, 9, true);
  SampleStream grouped(n, 9, true, lengths, group);
  for (std::int64_t epoch = 0; epoch < 3; ++epoch) {
    std::vector<std::int64_t> seen;
    for (std::int64_t begin = 0; begin < n; begin += group) {
      const std::int64_t end = std::min(n, begin + group);
      std::vector<std::int64_t> a, b;
      for (std::int64_t i = begin; i < end; ++i) {
        a.push_back(plain.row(epoch * n + i));
        b.push_back(grouped.row(epoch * n + i));
      }
      for (std::size_t i = 1; i < b.size(); ++i)
        ASSERT_GE(lengths[b[i - 1]], lengths[b[i]]) << "epoch " << epoch << " sample " << begin + i;
      seen.insert(seen.end(), b.begin(), b.end());
      std::sort(a.begin(), a.end());
      std::sort(b.begin(), b.end());
      ASSERT_EQ(a, b) << "run at " << begin << " of epoch " << epoch;
    }
    std::sort(seen.begin(), seen.end());
    for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[i], i);
  }
  // Different epochs are ordered differently.
  EXPECT_NE(grouped.row(0 * n + 500), grouped.row(1 * n + 500));
}

}  // namespace
}  // namespace bertfit
