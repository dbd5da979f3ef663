// Residual add, bias gradient and row gather/scatter against the double reference, plus the
// bias gradient's independence from the thread count.
#include "kernels/elementwise.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "base/parallel.h"
#include "kernels/cast.h"
#include "kernels/ref/ref.h"
#include "kernels/test_util.h"

namespace bertfit {
namespace {

using testing::all_close;
using testing::FloatView;
using testing::kU;
using testing::Rng;

const int kWidths[] = {1, 7, 63, 64, 65, 767, 768, 769};
const std::int64_t kRows[] = {1, 3, 17};

TEST(Elementwise, AddMatchesReference) {
  for (std::int64_t n : {1, 7, 63, 64, 65, 767, 768, 769, 33 * 768}) {
    Rng rng(n);
    FloatView a(n), b(n), out(n);
    a.fill_uniform(rng, -1, 1);
    b.fill_uniform(rng, -1, 1);
    add_forward(out.data(), a.data(), b.data(), n);
    std::vector<double> want(n);
    ref::add_forward(want.data(), a.to_double().data(), b.to_double().data(), n);
    // One float addition: u·|sum|.
    EXPECT_TRUE(all_close(out.data(), want.data(), n,
                          [&](std::int64_t i) { return kU * std::fabs(want[i]); }))
        << "n=" << n;
    add_forward(a.data(), a.data(), b.data(), n);  // aliasing out = a
    EXPECT_TRUE(all_close(a.data(), want.data(), n,
                          [&](std::int64_t i) { return kU * std::fabs(want[i]); }));
  }
}

TEST(Elementwise, BiasBackwardMatchesReference) {
  std::vector<std::pair<std::int64_t, int>> shapes;
  for (std::int64_t N : kRows) {
    for (int M : kWidths) shapes.push_back({N, M});
  }
  shapes.push_back({40, 769});  // multi-threaded path
  for (auto [N, M] : shapes) {
    Rng rng(N * 100 + M);
    FloatView dout(N * M), db(M);
    dout.fill_uniform(rng, -1, 1);
    db.fill_uniform(rng, -1, 1);
    std::vector<double> want = db.to_double();
    const std::vector<double> db0 = want;
    ref::bias_backward(want.data(), dout.to_double().data(), N, M);
    bias_backward(db.data(), dout.data(), N, M);
    // The column sum is accumulated in double (exact to ~N·2^-53), rounded once to float and
    // added once to the initial value: <= u·(|sum| + |result|) <= 2u·(|result| + |initial|).
    EXPECT_TRUE(all_close(
        db.data(), want.data(), M,
        [&](std::int64_t c) { return 2 * kU * (std::fabs(want[c]) + std::fabs(db0[c])); }))
        << "N=" << N << " M=" << M;
  }
}

TEST(Elementwise, BiasBackwardIsIndependentOfThreadCount) {
  const std::int64_t N = 300;
  const int M = 769;
  Rng rng(9);
  FloatView dout(N * M);
  dout.fill_uniform(rng, -1, 1);
  const int saved = num_threads();
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    FloatView db(M);
    bias_backward(db.data(), dout.data(), N, M);
    results.emplace_back(db.data(), db.data() + M);
  }
  set_num_threads(saved);
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

// The fused form gives the same bias gradient as bias_backward and the same bits as
// cast_f32_to_bf16, including NaN, infinities and values that round to a tie.
TEST(Elementwise, BiasBackwardCastMatchesSeparatePasses) {
  for (int M : kWidths) {
    for (std::int64_t N : kRows) {
      Rng rng(static_cast<std::uint64_t>(M * 31 + N));
      FloatView dout(N * M), db(M), db_fused(M);
      dout.fill_uniform(rng, -3, 3);
      dout[0] = std::nanf("");
      if (N * M > 2) dout[N * M - 1] = -INFINITY;
      if (N * M > 3) dout[1] = 1.00390625f;  // 1 + 2^-8: a tie, rounds to even (1.0)
      db.fill_uniform(rng, -1, 1);
      for (int c = 0; c < M; ++c) db_fused[c] = db[c];
      std::vector<std::uint16_t> want(static_cast<std::size_t>(N * M)), got(want.size());
      cast_f32_to_bf16(want.data(), dout.data(), N * M);
      bias_backward(db.data(), dout.data(), N, M);
      bias_backward_cast(db_fused.data(), got.data(), dout.data(), N, M);
      EXPECT_EQ(got, want) << "N=" << N << " M=" << M;
      for (int c = 0; c < M; ++c) {
        EXPECT_TRUE(db[c] == db_fused[c] || (std::isnan(db[c]) && std::isnan(db_fused[c])))
            << "N=" << N << " M=" << M << " c=" << c;
      }
    }
  }
}

TEST(Elementwise, GatherAndScatterMatchReference) {
  for (int C : kWidths) {
    const std::int64_t N = 17, R = 6;
    // Row 3 appears twice: the scatter must add both.
    const std::vector<std::int64_t> rows = {0, 3, 16, 3, 8, 11};
    Rng rng(C);
    FloatView x(N * C), out(R * C), dout(R * C), dx(N * C);
    x.fill_uniform(rng, -1, 1);
    dout.fill_uniform(rng, -1, 1);
    dx.fill_uniform(rng, -1, 1);
    gather_rows(out.data(), x.data(), rows.data(), R, C);
    std::vector<double> want(R * C);
    ref::gather_rows(want.data(), x.to_double().data(), rows.data(), R, C);
    EXPECT_TRUE(all_close(out.data(), want.data(), R * C, 0.0)) << "copies are exact";
    std::vector<double> rdx = dx.to_double();
    ref::scatter_add_rows(rdx.data(), dout.to_double().data(), rows.data(), R, C);
    scatter_add_rows(dx.data(), dout.data(), rows.data(), R, C);
    // At most 3 float additions land on one element (row 3: initial + 2): <= 2u·(|x0| + Σ|g|).
    EXPECT_TRUE(all_close(dx.data(), rdx.data(), N * C, 2 * kU * 3)) << "C=" << C;
  }
}

TEST(Elementwise, PackAndUnpackRowsInPlace) {
  Rng rng(11);
  for (int C : kWidths) {
    for (int trial = 0; trial < 20; ++trial) {
      const std::int64_t N = 1 + rng.below(40);
      std::vector<std::int64_t> rows;
      for (std::int64_t p = 0; p < N; ++p)
        if (trial == 0 || rng.below(3) != 0) rows.push_back(p);  // trial 0: no padding
      const auto R = static_cast<std::int64_t>(rows.size());
      FloatView x(N * C);
      x.fill_uniform(rng, -1, 1);
      const std::vector<double> padded = x.to_double();
      std::vector<double> want(R * C);
      ref::gather_rows(want.data(), padded.data(), rows.data(), R, C);
      pack_rows(x.data(), rows.data(), R, C);
      ASSERT_TRUE(all_close(x.data(), want.data(), R * C, 0.0)) << "pack, C=" << C;
      unpack_rows(x.data(), rows.data(), R, N, C);
      std::vector<double> back(N * C, 0.0);
      for (std::int64_t r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) back[rows[r] * C + c] = padded[rows[r] * C + c];
      ASSERT_TRUE(all_close(x.data(), back.data(), N * C, 0.0)) << "unpack, C=" << C;
    }
  }
}

}  // namespace
}  // namespace bertfit
