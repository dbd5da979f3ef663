// Internal to kernels/: when a kernel goes multi-threaded, and a column-partitioned parallel
// loop for reductions over rows (column sums, scatters) that must be race-free and give the
// same bits whatever the thread count.
#pragma once

#include <algorithm>
#include <cstdint>

#include "base/parallel.h"

namespace bertfit::detail {

// Below about 16K floats of work a kernel runs on one thread (parallel_for goes parallel
// when n >= 2 · min_per_thread).
inline constexpr std::int64_t kMinWorkPerThread = 8192;

// min_per_thread for parallel_for over rows of C floats.
inline std::int64_t rows_grain(std::int64_t C) {
  return std::max<std::int64_t>(1, kMinWorkPerThread / std::max<std::int64_t>(1, C));
}

// Columns are handed out in blocks of 16 floats (one AVX-512 register, 64 bytes).
inline constexpr int kColumnBlock = 16;

// Calls body(c0, c1) over disjoint column ranges covering [0, C); each range is handled by one
// thread, which walks all N rows in order. A column's result therefore never depends on the
// thread count, and threads never write the same column.
template <class Body>
void parallel_columns(std::int64_t N, int C, Body&& body) {
  const std::int64_t blocks = (C + kColumnBlock - 1) / kColumnBlock;
  const std::int64_t per_block = std::max<std::int64_t>(1, N) * kColumnBlock;
  const std::int64_t grain = std::max<std::int64_t>(1, kMinWorkPerThread / per_block);
  parallel_for(blocks, grain, [&](std::int64_t b0, std::int64_t b1) {
    const int c0 = static_cast<int>(b0 * kColumnBlock);
    const int c1 = static_cast<int>(std::min<std::int64_t>(C, b1 * kColumnBlock));
    body(c0, c1);
  });
}

}  // namespace bertfit::detail
