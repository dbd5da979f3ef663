// parallel_for and parallel_tasks: every index exactly once, whatever the thread count,
// parallel_tasks' per-thread state made at most once per thread, and either called from inside
// a parallel region runs on the calling thread alone.
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

TEST(Parallel, InsideAParallelRegionRunsOnTheCallingThread) {
  const int saved = num_threads();
  set_num_threads(2);
  constexpr std::int64_t kOuter = 4, kInner = 1000;
  std::vector<std::atomic<int>> seen(kOuter * kInner);
  std::atomic<int> nested_calls{0}, wrong_thread{0}, outer_threads{0};
  parallel_for(kOuter, 1, [&](std::int64_t b, std::int64_t e) {
    EXPECT_TRUE(in_parallel_region());
    ++outer_threads;
    const int me = omp_thread_index();
    for (std::int64_t o = b; o < e; ++o) {
      parallel_for(kInner, 1, [&](std::int64_t ib, std::int64_t ie) {
        ++nested_calls;  // one call for the whole range: no second team
        if (omp_thread_index() != me || ib != 0 || ie != kInner) ++wrong_thread;
        for (std::int64_t i = ib; i < ie; ++i) ++seen[static_cast<std::size_t>(o * kInner + i)];
      });
      parallel_tasks(
          kInner, [] { return 0; },
          [&](std::int64_t i, int&) {
            if (omp_thread_index() != me) ++wrong_thread;
            ++seen[static_cast<std::size_t>(o * kInner + i)];
          });
    }
  });
  EXPECT_FALSE(in_parallel_region());
  EXPECT_EQ(outer_threads.load(), 2);
  EXPECT_EQ(nested_calls.load(), kOuter);
  EXPECT_EQ(wrong_thread.load(), 0);
  for (const auto& s : seen) EXPECT_EQ(s.load(), 2);
  set_num_threads(saved);
}

}  // namespace
}  // namespace bertfit
