// small_gemm and small_gemm_bf16 against a double-precision triple loop: every tile shape (row
// remainders 1-7, 32- and 16-column blocks, scalar column tails), transposed A, alpha and
// accumulation.
#include "kernels/small_gemm.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
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

// small_gemm_bf16 (the CPU's path, and the scalar loop) against a double product of the same
// bf16 values, with the operands packed from fp32 sources: A row-major (pack_rows) or given as
// its transpose (pack_pairs, read as Aᵀ), B from its rows (pack_pairs) or from the rows of Bᵀ
// (pack_pairs_within_rows). Every product of two bf16 values is exact in fp32, so the only
// errors are the K additions and the scaling: bound (K + 2)·u·Σ|a·b|, as for small_gemm.
void check_bf16(int M, int N, int K, float alpha, bool accumulate, bool transposed, bool scalar) {
  SCOPED_TRACE(::testing::Message() << M << "x" << N << "x" << K << (transposed ? " At Bt" : "")
                                    << (scalar ? " scalar" : ""));
  Rng rng(static_cast<std::uint64_t>(M * 7919 + N * 131 + K));
  const int K2 = (K + 1) / 2, ldb = (N + 15) / 16 * 16 + 16, ldc = N + 3;
  std::vector<float> a(static_cast<std::size_t>(M) * K), b(static_cast<std::size_t>(K) * N);
  std::vector<float> c(static_cast<std::size_t>(M) * ldc);
  for (auto& x : a) x = static_cast<float>(rng.uniform(-1, 1));
  for (auto& x : b) x = static_cast<float>(rng.uniform(-1, 1));
  for (auto& x : c) x = static_cast<float>(rng.uniform(-1, 1));
  // Stale values in the packed buffers' padding must not matter: fill them with NaN first.
  constexpr std::uint16_t kNaN = 0x7fc0;
  const int lda = 2 * K2 + 6, ldat = M + 5;
  std::vector<std::uint16_t> ap(static_cast<std::size_t>(M) * lda, kNaN);
  std::vector<std::uint32_t> apt(static_cast<std::size_t>(K2) * ldat, 0x7fc07fc0u);
  std::vector<std::uint32_t> bp(static_cast<std::size_t>(K2) * ldb, 0x7fc07fc0u);
  detail::BF16Pairs av{ap.data(), lda, 2};
  if (transposed) {
    std::vector<float> at(a.size());  // Aᵀ (K×M)
    for (int i = 0; i < M; ++i) {
      for (int k = 0; k < K; ++k) at[static_cast<std::size_t>(k) * M + i] = a[i * K + k];
    }
    detail::pack_pairs(apt.data(), ldat, at.data(), M, K, M);
    av = {apt.data(), 2, 2 * ldat};
    std::vector<std::uint16_t> bt(b.size());  // Bᵀ (N×K) in bf16
    for (int k = 0; k < K; ++k) {
      for (int n = 0; n < N; ++n)
        bt[static_cast<std::size_t>(n) * K + k] = f32_to_bf16(b[k * N + n]);
    }
    detail::pack_pairs_within_rows(bp.data(), ldb, bt.data(), K, K, N);
  } else {
    detail::pack_rows(ap.data(), lda, a.data(), K, M, K);
    detail::pack_pairs(bp.data(), ldb, b.data(), N, K, N);
  }
  auto round = [](float x) {
    return static_cast<double>(
        std::bit_cast<float>(static_cast<std::uint32_t>(f32_to_bf16(x)) << 16));
  };
  const std::vector<float> c0 = c;
  (scalar ? detail::small_gemm_bf16_scalar : detail::small_gemm_bf16)(
      M, N, K2, alpha, av, bp.data(), ldb, c.data(), ldc, accumulate);
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < ldc; ++j) {
      const float got = c[static_cast<std::size_t>(i) * ldc + j];
      const float before = c0[static_cast<std::size_t>(i) * ldc + j];
      if (j >= N) {
        ASSERT_EQ(got, before) << "(" << i << "," << j << ")";
        continue;
      }
      double want = 0, bound = 0;
      for (int k = 0; k < K; ++k) {
        const double p = round(a[static_cast<std::size_t>(i) * K + k]) * round(b[k * N + j]);
        want += p;
        bound += std::fabs(p);
      }
      want *= alpha;
      bound = (K + 2) * kU * bound * std::fabs(alpha);
      if (accumulate) {
        want += before;
        bound += 2 * kU * (std::fabs(before) + std::fabs(want));
      }
      ASSERT_NEAR(got, want, bound + 1e-30) << "(" << i << "," << j << ")";
    }
  }
}

TEST(SmallGemmBf16, MatchesDoubleProductOverEveryTileShape) {
  for (bool scalar : {false, true}) {
    for (int M : {1, 2, 3, 7, 8, 9, 15, 17}) {
      for (int N : {1, 5, 15, 16, 17, 31, 32, 33, 48, 64, 70}) {
        for (int K : {1, 2, 3, 16, 63, 64}) {
          check_bf16(M, N, K, 1.0f, false, false, scalar);
          check_bf16(M, N, K, 0.125f, true, true, scalar);
        }
      }
    }
  }
}

TEST(SmallGemmBf16, AttentionSizedProducts) {
  check_bf16(128, 128, 64, 0.125f, false, true, false);  // scores: q·kᵀ/√D
  check_bf16(128, 64, 128, 1.0f, false, false, false);   // out: P·v
  check_bf16(53, 64, 53, 0.125f, true, false, false);    // dQ += dS·k/√D, a 53-token sequence
}

}  // namespace
}  // namespace bertfit
