// SplitMix64, epoch permutations, batch cutting and per-rank sharding (see shuffle.h).
#include "data/shuffle.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "base/check.h"

namespace bertfit {

std::uint64_t SplitMix64::mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::uint64_t SplitMix64::next() {
  state_ += 0x9E3779B97F4A7C15ull;
  return mix64(state_);
}

std::uint64_t SplitMix64::uniform(std::uint64_t bound) {
  CHECK(bound >= 1, "uniform bound must be positive");
  const std::uint64_t threshold = (0 - bound) % bound;  // (2^64 - bound) mod bound
  while (true) {
    std::uint64_t r = next();
    if (r >= threshold) return r % bound;
  }
}

std::vector<std::int64_t> epoch_order(std::int64_t n, std::uint64_t seed, std::int64_t epoch,
                                      bool shuffle) {
  CHECK(n >= 0, "negative example count ", n);
  CHECK(epoch >= 0, "negative epoch ", epoch);
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  if (!shuffle) return order;
  SplitMix64 rng(SplitMix64::mix64(seed ^ SplitMix64::mix64(static_cast<std::uint64_t>(epoch))));
  for (std::int64_t i = n - 1; i >= 1; --i) {
    auto j = static_cast<std::int64_t>(rng.uniform(static_cast<std::uint64_t>(i) + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

std::vector<std::vector<std::int64_t>> split_batches(std::span<const std::int64_t> order,
                                                     std::int64_t batch_size, bool drop_last) {
  CHECK(batch_size >= 1, "batch size must be positive, got ", batch_size);
  std::vector<std::vector<std::int64_t>> batches;
  const auto n = static_cast<std::int64_t>(order.size());
  for (std::int64_t begin = 0; begin < n; begin += batch_size) {
    std::int64_t end = std::min(n, begin + batch_size);
    if (end - begin < batch_size && drop_last) break;
    batches.emplace_back(order.begin() + begin, order.begin() + end);
  }
  return batches;
}

ShardRange shard_range(std::int64_t size, int rank, int world) {
  CHECK(world >= 1 && rank >= 0 && rank < world, "bad rank ", rank, " of world ", world);
  CHECK(size >= 0, "negative batch size ", size);
  const std::int64_t q = size / world, r = size % world;
  ShardRange range;
  range.begin = rank * q + std::min<std::int64_t>(rank, r);
  range.end = range.begin + q + (rank < r ? 1 : 0);
  return range;
}

std::vector<std::int64_t> balanced_shard(std::span<const std::int64_t> costs, int rank, int world) {
  CHECK(world >= 1 && rank >= 0 && rank < world, "bad rank ", rank, " of world ", world);
  std::vector<std::int64_t> order(costs.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int64_t>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::int64_t a, std::int64_t b) { return costs[a] > costs[b]; });
  std::vector<std::int64_t> mine;
  for (std::size_t k = 0; k < order.size(); ++k) {
    const std::int64_t lap = static_cast<std::int64_t>(k) % (2 * world);
    const std::int64_t r = lap < world ? lap : 2 * world - 1 - lap;
    if (r == rank) mine.push_back(order[k]);
  }
  std::sort(mine.begin(), mine.end());
  return mine;
}

std::vector<std::int64_t> shard_indices(std::span<const std::int64_t> global, int rank, int world) {
  ShardRange range = shard_range(static_cast<std::int64_t>(global.size()), rank, world);
  return std::vector<std::int64_t>(global.begin() + range.begin, global.begin() + range.end);
}

}  // namespace bertfit
