// Deterministic data order: a fully specified 64-bit generator (SplitMix64), the per-epoch
// permutation of the examples, cutting an order into batches, and the per-rank slice of a
// global batch for data-parallel training. Nothing here depends on the standard library's
// unspecified algorithms (std::shuffle, std::uniform_int_distribution), so an order is the same
// on every platform and every rank.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace bertfit {

// SplitMix64 (Steele, Lea, Flood 2014; Vigna's reference constants).
//   next():  state += 0x9E3779B97F4A7C15; return mix64(state)
//   mix64(z): z = (z ^ z>>30) * 0xBF58476D1CE4E5B9; z = (z ^ z>>27) * 0x94D049BB133111EB;
//             return z ^ z>>31
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  static std::uint64_t mix64(std::uint64_t z);
  std::uint64_t next();
  // Uniform in [0, bound), bound >= 1, without modulo bias: draws r = next() until
  // r >= (2^64 - bound) mod bound, then returns r mod bound.
  std::uint64_t uniform(std::uint64_t bound);

 private:
  std::uint64_t state_;
};

// A permutation of [0, n) that depends only on (seed, epoch). With shuffle: Fisher-Yates from
// the back, for i = n-1 down to 1: j = rng.uniform(i + 1), swap(p[i], p[j]), with
// rng = SplitMix64(mix64(seed ^ mix64(epoch))). Without shuffle: the identity.
std::vector<std::int64_t> epoch_order(std::int64_t n, std::uint64_t seed, std::int64_t epoch,
                                      bool shuffle);

// Cuts an order into consecutive batches of batch_size; the last one is shorter unless
// drop_last, in which case it is dropped (as PyTorch's DataLoader).
std::vector<std::vector<std::int64_t>> split_batches(std::span<const std::int64_t> order,
                                                     std::int64_t batch_size, bool drop_last);

// The slice [begin, end) of a global batch of `size` rows that rank `rank` of `world` takes.
// Rule: contiguous, in rank order, sizes differ by at most one: with q = size / world and
// r = size % world, rank k gets q + (k < r) rows starting at k*q + min(k, r). A rank may get
// zero rows when size < world. The union over ranks is the whole batch, in order, so N ranks
// see exactly the rows one rank would; the trainer must weight each rank's mean loss by its
// row count when averaging gradients for the uneven last batch.
struct ShardRange {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::int64_t size() const { return end - begin; }
};
ShardRange shard_range(std::int64_t size, int rank, int world);
// This rank's rows of a global batch of example indices.
std::vector<std::int64_t> shard_indices(std::span<const std::int64_t> global, int rank, int world);

// Load-balanced sharding of a global batch whose rows cost costs[i] (e.g. token counts: with
// unpadded execution a rank's step time follows its real tokens, and every step waits for the
// slowest rank). Positions are sorted by cost, descending (ties: lower position first), and
// dealt in snake order (ranks 0, 1, .., N-1, N-1, .., 1, 0, 0, 1, ..), so row counts differ by
// at most one and cost totals by at most about one row's cost. Returns this rank's positions
// in increasing order. Every position goes to exactly one rank, and the assignment depends only
// on (costs, world), so every rank computes the same split without talking.
std::vector<std::int64_t> balanced_shard(std::span<const std::int64_t> costs, int rank, int world);

}  // namespace bertfit
