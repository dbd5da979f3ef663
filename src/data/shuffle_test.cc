// Tests of SplitMix64, epoch permutations, batch cutting and sharding. The expected orders were
// computed by an independent Python transcription of the algorithm documented in shuffle.h.
#include "data/shuffle.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

namespace bertfit {
namespace {

using Ids = std::vector<std::int64_t>;

TEST(Shuffle, SplitMix64ReferenceOutputs) {
  // Vigna's splitmix64.c seeded with 0.
  SplitMix64 rng(0);
  EXPECT_EQ(rng.next(), 0xe220a8397b1dcdafull);
  EXPECT_EQ(rng.next(), 0x6e789e6aa1b965f4ull);
  EXPECT_EQ(rng.next(), 0x06c45d188009454full);
}

TEST(Shuffle, UniformStaysInRange) {
  SplitMix64 rng(123);
  std::vector<int> counts(3);
  for (int i = 0; i < 3000; ++i) counts[rng.uniform(3)] += 1;
  // Each of 3 outcomes: mean 1000, sd sqrt(3000 * 1/3 * 2/3) ~ 26; 150 is ~6 sd.
  for (int c : counts) EXPECT_NEAR(c, 1000, 150);
  EXPECT_EQ(rng.uniform(1), 0u);
}

TEST(Shuffle, EpochOrderMatchesReferenceAndIsDeterministic) {
  EXPECT_EQ(epoch_order(10, 42, 0, true), (Ids{4, 7, 2, 9, 0, 6, 8, 5, 3, 1}));
  EXPECT_EQ(epoch_order(10, 42, 1, true), (Ids{9, 7, 6, 2, 1, 8, 4, 3, 5, 0}));
  EXPECT_EQ(epoch_order(10, 7, 0, true), (Ids{1, 6, 8, 2, 4, 9, 3, 0, 7, 5}));
  EXPECT_EQ(epoch_order(1, 42, 0, true), (Ids{0}));
  EXPECT_TRUE(epoch_order(0, 42, 0, true).empty());
  EXPECT_EQ(epoch_order(5, 42, 3, false), (Ids{0, 1, 2, 3, 4}));
  Ids a = epoch_order(1000, 9, 4, true);
  EXPECT_EQ(a, epoch_order(1000, 9, 4, true));
  EXPECT_NE(a, epoch_order(1000, 9, 5, true));
  Ids sorted = a;
  std::sort(sorted.begin(), sorted.end());
  Ids identity(1000);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_EQ(sorted, identity);  // a permutation
}

TEST(Shuffle, SplitBatches) {
  Ids order = {5, 4, 3, 2, 1, 0, 9};
  auto batches = split_batches(order, 3, false);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0], (Ids{5, 4, 3}));
  EXPECT_EQ(batches[2], (Ids{9}));
  EXPECT_EQ(split_batches(order, 3, true).size(), 2u);
  EXPECT_EQ(split_batches(order, 7, true).size(), 1u);
  EXPECT_TRUE(split_batches(Ids{}, 4, false).empty());
}

TEST(Shuffle, ShardingCoversTheBatchInOrder) {
  // 10 rows over 4 ranks: q = 2, r = 2 -> sizes 3, 3, 2, 2 starting at 0, 3, 6, 8.
  EXPECT_EQ(shard_range(10, 0, 4).begin, 0);
  EXPECT_EQ(shard_range(10, 1, 4).begin, 3);
  EXPECT_EQ(shard_range(10, 2, 4).begin, 6);
  EXPECT_EQ(shard_range(10, 3, 4).begin, 8);
  EXPECT_EQ(shard_range(10, 3, 4).end, 10);
  EXPECT_EQ(shard_range(2, 3, 4).size(), 0);  // fewer rows than ranks
  for (int world : {1, 2, 3, 5, 8}) {
    for (std::int64_t size : {0, 1, 7, 8, 33}) {
      Ids global(size);
      std::iota(global.begin(), global.end(), 100);
      Ids joined;
      std::int64_t min_size = size, max_size = 0;
      for (int rank = 0; rank < world; ++rank) {
        Ids part = shard_indices(global, rank, world);
        min_size = std::min<std::int64_t>(min_size, part.size());
        max_size = std::max<std::int64_t>(max_size, part.size());
        joined.insert(joined.end(), part.begin(), part.end());
      }
      EXPECT_EQ(joined, global) << size << " rows, " << world << " ranks";
      EXPECT_LE(max_size - min_size, 1);
    }
  }
}

TEST(Shuffle, BalancedShardingSplitsTheCostEvenly) {
  // Costs 10, 9, .., 1 over 2 ranks: snake order gives rank 0 {10, 7, 6, 3, 2} = 28 and
  // rank 1 {9, 8, 5, 4, 1} = 27; a contiguous split would give 40 and 15.
  Ids costs = {10, 9, 8, 7, 6, 5, 4, 3, 2, 1};
  EXPECT_EQ(balanced_shard(costs, 0, 2), (Ids{0, 3, 4, 7, 8}));
  EXPECT_EQ(balanced_shard(costs, 1, 2), (Ids{1, 2, 5, 6, 9}));
  SplitMix64 rng(3);
  for (int world : {1, 2, 3, 4, 8}) {
    for (std::int64_t size : {0, 1, 7, 32, 128, 129}) {
      Ids c(size);
      std::int64_t biggest = 0;
      for (auto& x : c)
        biggest = std::max(biggest, x = 8 + static_cast<std::int64_t>(rng.next() % 120));
      std::vector<int> owner(size, -1);
      std::int64_t min_n = size, max_n = 0, min_cost = 1 << 30, max_cost = 0;
      for (int rank = 0; rank < world; ++rank) {
        Ids part = balanced_shard(c, rank, world);
        EXPECT_TRUE(std::is_sorted(part.begin(), part.end()));
        std::int64_t cost = 0;
        for (std::int64_t p : part) {
          ASSERT_EQ(owner[p], -1) << "position " << p << " dealt twice";
          owner[p] = rank;
          cost += c[p];
        }
        min_n = std::min<std::int64_t>(min_n, part.size());
        max_n = std::max<std::int64_t>(max_n, part.size());
        min_cost = std::min(min_cost, cost);
        max_cost = std::max(max_cost, cost);
      }
      for (int o : owner) ASSERT_GE(o, 0);
      EXPECT_LE(max_n - min_n, 1) << size << " rows, " << world << " ranks";
      if (size >= world) {
        EXPECT_LE(max_cost - min_cost, 2 * biggest) << size << " rows, " << world;
      }
    }
  }
}

}  // namespace
}  // namespace bertfit
