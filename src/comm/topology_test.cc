// Topology: CPU list parsing, the split of a host's cores among local ranks, quota capping, and
// pinning this process to the cores it already has.
#include "comm/topology.h"

#include <gtest/gtest.h>
#include <sched.h>

#include "base/error.h"

namespace bertfit {
namespace {

TEST(CpuList, ParseAndFormat) {
  EXPECT_EQ(parse_cpu_list("0-3,8,10-11\n"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parse_cpu_list(" 5 "), (std::vector<int>{5}));
  EXPECT_EQ(parse_cpu_list("3,1-2,2"), (std::vector<int>{1, 2, 3}));
  EXPECT_TRUE(parse_cpu_list("").empty());
  EXPECT_THROW(parse_cpu_list("3-1"), Error);
  EXPECT_THROW(parse_cpu_list("a"), Error);
  EXPECT_THROW(parse_cpu_list("1-2-3"), Error);
  EXPECT_EQ(format_cpu_list({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(format_cpu_list({}), "");
}

TEST(CpuShare, ContiguousEqualGroups) {
  std::vector<int> cores = {0, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(cpu_share_of(cores, 0, 0, 1).cores, cores);
  EXPECT_EQ(cpu_share_of(cores, 0, 0, 2).cores, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(cpu_share_of(cores, 0, 1, 2).cores, (std::vector<int>{4, 5, 6, 7}));
  // 8 cores, 3 ranks: 2 each, never overlapping; cores 6-7 stay free.
  EXPECT_EQ(cpu_share_of(cores, 0, 2, 3).cores, (std::vector<int>{4, 5}));
  // Non-contiguous ids keep their order.
  EXPECT_EQ(cpu_share_of({2, 3, 8, 9}, 0, 1, 2).cores, (std::vector<int>{8, 9}));
}

TEST(CpuShare, FewerCoresThanRanksShareCores) {
  std::vector<int> cores = {0, 1};
  for (int r = 0; r < 4; ++r) {
    CpuShare share = cpu_share_of(cores, 0, r, 4);
    ASSERT_EQ(share.cores.size(), 1u);
    EXPECT_EQ(share.cores[0], r < 2 ? 0 : 1);
    EXPECT_EQ(share_threads(share), 1);
  }
}

TEST(CpuShare, QuotaCapsThreads) {
  std::vector<int> cores = {0, 1, 2, 3};
  CpuShare share = cpu_share_of(cores, 0.5, 0, 1);  // an emulated node with half a core
  EXPECT_DOUBLE_EQ(share.quota_cores, 0.5);
  EXPECT_EQ(share_threads(share), 1);
  EXPECT_EQ(share_threads(cpu_share_of(cores, 3.0, 0, 1)), 3);
  EXPECT_EQ(share_threads(cpu_share_of(cores, 8.0, 0, 2)), 2);  // 4 cores each half: 2
  EXPECT_EQ(share_threads(cpu_share_of(cores, 0, 0, 1)), 4);
  EXPECT_EQ(describe_share(cpu_share_of(cores, 0.5, 0, 1)), "cores 0-3, quota 0.5 core (1 thread)");
  EXPECT_EQ(describe_share(cpu_share_of(cores, 0, 1, 2)), "cores 2-3 (2 threads)");
}

TEST(CpuShare, ThisProcess) {
  std::vector<int> allowed = allowed_cores();
  ASSERT_FALSE(allowed.empty());
  EXPECT_GE(cpu_quota_cores(), 0.0);
  CpuShare share = cpu_share(0, 1);
  EXPECT_EQ(share.cores, allowed);
  // Pinning to what we already have changes nothing but must succeed.
  int threads = apply_cpu_share(share);
  EXPECT_GE(threads, 1);
  EXPECT_LE(threads, static_cast<int>(allowed.size()));
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  EXPECT_EQ(CPU_COUNT(&set), static_cast<int>(allowed.size()));
}

TEST(CpuShare, PinningToAForbiddenCoreFails) {
  CpuShare share;
  share.cores = {CPU_SETSIZE - 1};  // no machine here has 1024 cores
  EXPECT_THROW(apply_cpu_share(share), Error);
}

}  // namespace
}  // namespace bertfit
