// parallel_for and parallel_tasks: every index exactly once, whatever the thread count, and
// parallel_tasks' per-thread state made at most once per thread.
#include "base/parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace bertfit {
namespace {

TEST(Parallel, EveryIndexExactlyOnce) {
  const int saved = num_threads();
  for (int threads : {1, 2, 4}) {
    set_num_threads(threads);
    for (std::int64_t n : {0, 1, 2, 5, 384}) {
      std::vector<std::atomic<int>> seen_for(static_cast<std::size_t>(n));
      std::vector<std::atomic<int>> seen_tasks(static_cast<std::size_t>(n));
      parallel_for(n, 1, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) ++seen_for[static_cast<std::size_t>(i)];
      });
      std::atomic<int> states{0};
      parallel_tasks(
          n,
          [&] {
            ++states;
            return std::vector<int>(3, 7);  // a per-thread scratch
          },
          [&](std::int64_t i, std::vector<int>& scratch) {
            ASSERT_EQ(scratch.size(), 3u);
            ++seen_tasks[static_cast<std::size_t>(i)];
          });
      for (std::int64_t i = 0; i < n; ++i) {
        EXPECT_EQ(seen_for[static_cast<std::size_t>(i)].load(), 1)
            << threads << " " << n << " " << i;
        EXPECT_EQ(seen_tasks[static_cast<std::size_t>(i)].load(), 1)
            << threads << " " << n << " " << i;
      }
      EXPECT_LE(states.load(), threads);
      EXPECT_EQ(states.load() == 0, n == 0);
    }
  }
  set_num_threads(saved);
}

}  // namespace
}  // namespace bertfit
