// small_gemm against a double-precision triple loop: every tile shape (row remainders 1-7,
// 32- and 16-column blocks, scalar column tails), transposed A, alpha and accumulation.
#include "kernels/small_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/test_util.h"

namespace bertfit {
namespace {

using testing::kU;
using testing::Rng;

void check(int M, int N, int K, bool transposed_a, float alpha, bool accumulate) {
  Rng rng(static_cast<std::uint64_t>(M * 10007 + N * 101 + K));
  const int lda = transposed_a ? M + 3 : K + 5, ldb = N + 2, ldc = N + 7;
  std::vector<float> a(static_cast<std::size_t>(transposed_a ? K * lda : M * lda));
  std::vector<float> b(static_cast<std::size_t>(K) * ldb), c(static_cast<std::size_t>(M) * ldc);
  for (auto& x : a) x = static_cast<float>(rng.uniform(-1, 1));
  for (auto& x : b) x = static_cast<float>(rng.uniform(-1, 1));
  for (auto& x : c) x = static_cast<float>(rng.uniform(-1, 1));
  const std::vector<float> c0 = c;
  const std::ptrdiff_t a_row = transposed_a ? 1 : lda, a_col = transposed_a ? lda : 1;
  detail::small_gemm(M, N, K, alpha, a.data(), a_row, a_col, b.data(), ldb, c.data(), ldc,
                     accumulate);
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < ldc; ++j) {
      const float got = c[static_cast<std::size_t>(i) * ldc + j];
      const float before = c0[static_cast<std::size_t>(i) * ldc + j];
      if (j >= N) {  // outside the N columns: untouched
        ASSERT_EQ(got, before) << M << "x" << N << "x" << K << " (" << i << "," << j << ")";
        continue;
      }
      double want = 0, bound = 0;
      for (int k = 0; k < K; ++k) {
        const double p =
            double{a[i * a_row + k * a_col]} * b[static_cast<std::size_t>(k) * ldb + j];
        want += p;
        bound += std::fabs(p);
      }
      want *= alpha;
      bound = (K + 2) * kU * bound * std::fabs(alpha);
      if (accumulate) {
        want += before;
        bound += 2 * kU * (std::fabs(before) + std::fabs(want));
      }
      ASSERT_NEAR(got, want, bound + 1e-30)
          << M << "x" << N << "x" << K << (transposed_a ? " At" : "") << " (" << i << "," << j
          << ")";
    }
  }
}

TEST(SmallGemm, MatchesDoubleProductOverEveryTileShape) {
  for (int M : {1, 2, 3, 7, 8, 9, 15, 17}) {
    for (int N : {1, 5, 15, 16, 17, 31, 32, 33, 48, 64, 70}) {
      for (int K : {1, 3, 16, 64}) {
        check(M, N, K, false, 1.0f, false);
        check(M, N, K, true, 0.125f, true);
      }
    }
  }
}

TEST(SmallGemm, AttentionSizedProducts) {
  check(128, 128, 64, false, 1.0f, false);  // scores: (q/√D)·Kᵀ
  check(128, 64, 128, true, 1.0f, true);    // dV += Pᵀ·dO
  check(53, 64, 53, false, 0.125f, true);   // dQ += dS·K/√D, a 53-token sequence
}

}  // namespace
}  // namespace bertfit
