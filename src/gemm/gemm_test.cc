// gemm vs a double-precision triple loop over awkward shapes, transpositions, alpha/beta,
// bias, batch strides and the three Linear helpers.
#include "gemm/gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "base/dtype.h"

namespace bertfit {
namespace {

std::vector<float> random_vec(std::size_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Reference for one batch entry with the same conventions as MatmulDesc.
void ref_matmul(const MatmulDesc& d, const float* a, const float* b, float* c, const float* bias) {
  for (std::int64_t bt = 0; bt < d.batch; ++bt) {
    for (std::int64_t i = 0; i < d.M; ++i) {
      for (std::int64_t j = 0; j < d.N; ++j) {
        double s = 0;
        for (std::int64_t k = 0; k < d.K; ++k) {
          double av =
              d.trans_a ? a[bt * d.stride_a + k * d.lda + i] : a[bt * d.stride_a + i * d.lda + k];
          double bv =
              d.trans_b ? b[bt * d.stride_b + j * d.ldb + k] : b[bt * d.stride_b + k * d.ldb + j];
          s += av * bv;
        }
        float& out = c[bt * d.stride_c + i * d.ldc + j];
        double bias_v = bias ? bias[j] : 0.0;
        out = static_cast<float>(d.alpha * s + bias_v + d.beta * out);
      }
    }
  }
}

// fp32 products of length K with inputs ~N(0,1): the summation error is bounded by about
// K·eps·Σ|a·b| in the worst case and ~√K·eps·Σ|a·b| typically; Σ|a·b| ≈ 0.64·K. With
// K ≤ 769 and eps = 6e-8, 1e-4·(1 + |ref|) + 2e-5·K·eps·... is comfortably above the
// typical error and far below any indexing mistake (errors of order 1).
void expect_close(const std::vector<float>& got, const std::vector<float>& want, std::int64_t K) {
  double tol = 4.0 * K * 6e-8 * 0.64 * std::sqrt(static_cast<double>(K)) + 1e-5;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1.0 + std::fabs(want[i]))) << "at " << i;
  }
}

TEST(Gemm, StridedBatchedAllTranspositions) {
  std::mt19937 rng(1);
  for (auto [M, N, K] : {std::tuple{1, 1, 1}, {7, 63, 65}, {64, 5, 769}, {17, 33, 8}}) {
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        MatmulDesc d;
        d.batch = 3, d.M = M, d.N = N, d.K = K, d.trans_a = ta, d.trans_b = tb;
        d.lda = (ta ? M : K) + 3;  // padded rows: leading dimensions larger than the width
        d.ldb = (tb ? K : N) + 1;
        d.ldc = N + 2;
        d.stride_a = (ta ? K : M) * d.lda;
        d.stride_b = (tb ? N : K) * d.ldb;
        d.stride_c = M * d.ldc;
        d.alpha = 0.5f, d.beta = ta ? 1.0f : 0.0f;
        auto a = random_vec(d.batch * d.stride_a, rng);
        auto b = random_vec(d.batch * d.stride_b, rng);
        auto c = random_vec(d.batch * d.stride_c, rng);
        auto want = c;
        ref_matmul(d, a.data(), b.data(), want.data(), nullptr);
        matmul(d, a.data(), b.data(), c.data());
        expect_close(c, want, K);
      }
    }
  }
}

TEST(Gemm, LinearForwardAndBackward) {
  std::mt19937 rng(2);
  for (auto [M, K, N] : {std::tuple{1, 1, 1}, {7, 64, 65}, {63, 767, 3}, {65, 768, 769}}) {
    auto x = random_vec(M * K, rng), w = random_vec(N * K, rng), bias = random_vec(N, rng);
    auto dy = random_vec(M * N, rng);
    // Forward: y = x wᵀ + b.
    std::vector<float> y(M * N), y_ref(M * N, 0.0f);
    linear_forward(y.data(), x.data(), w.data(), bias.data(), M, K, N);
    MatmulDesc f{.M = M, .N = N, .K = K, .trans_b = true, .lda = K, .ldb = K, .ldc = N};
    ref_matmul(f, x.data(), w.data(), y_ref.data(), bias.data());
    expect_close(y, y_ref, K);
    // dx += dy w (accumulates onto existing values).
    auto dx = random_vec(M * K, rng);
    auto dx_ref = dx;
    linear_backward_input(dx.data(), dy.data(), w.data(), M, K, N);
    MatmulDesc bi{.M = M, .N = K, .K = N, .lda = N, .ldb = K, .ldc = K, .beta = 1.0f};
    ref_matmul(bi, dy.data(), w.data(), dx_ref.data(), nullptr);
    expect_close(dx, dx_ref, N);
    // dx = dy w (overwrites: NaN before must not leak in).
    std::vector<float> dx_new(M * K, std::numeric_limits<float>::quiet_NaN()), dx_new_ref(M * K);
    linear_backward_input(dx_new.data(), dy.data(), w.data(), M, K, N, Output::kOverwrite);
    bi.beta = 0.0f;
    ref_matmul(bi, dy.data(), w.data(), dx_new_ref.data(), nullptr);
    expect_close(dx_new, dx_new_ref, N);
    // dw += dyᵀ x.
    auto dw = random_vec(N * K, rng);
    auto dw_ref = dw;
    linear_backward_weight(dw.data(), dy.data(), x.data(), M, K, N);
    MatmulDesc bw{
        .M = N, .N = K, .K = M, .trans_a = true, .lda = N, .ldb = K, .ldc = K, .beta = 1.0f};
    ref_matmul(bw, dy.data(), x.data(), dw_ref.data(), nullptr);
    expect_close(dw, dw_ref, M);
  }
}

// Unpadded execution gives every batch its own token count: the primitive cache must stay
// bounded across more distinct shapes than it holds, and a shape that was evicted must compute
// correctly when it comes back.
TEST(Gemm, PrimitiveCacheStaysBoundedAndEvictedShapesStayCorrect) {
  std::mt19937 rng(3);
  const std::int64_t K = 16, N = 8;
  auto w = random_vec(N * K, rng);
  auto check = [&](std::int64_t M) {
    auto x = random_vec(M * K, rng);
    std::vector<float> y(M * N), y_ref(M * N, 0.0f);
    linear_forward(y.data(), x.data(), w.data(), nullptr, M, K, N);
    MatmulDesc f{.M = M, .N = N, .K = K, .trans_b = true, .lda = K, .ldb = K, .ldc = N};
    ref_matmul(f, x.data(), w.data(), y_ref.data(), nullptr);
    expect_close(y, y_ref, K);
  };
  const auto shapes = static_cast<std::int64_t>(kGemmCacheCapacity) + 40;
  for (std::int64_t M = 1; M <= shapes; ++M) {
    check(M);
    ASSERT_LE(gemm_cache_size(), kGemmCacheCapacity);
  }
  EXPECT_EQ(gemm_cache_size(), kGemmCacheCapacity);
  check(1);  // evicted long ago (least recently used)
  check(shapes);
}

TEST(Gemm, EmptyShapesDoNothing) {
  std::vector<float> y(4, 7.0f);
  linear_forward(y.data(), nullptr, nullptr, nullptr, 0, 5, 4);
  EXPECT_EQ(y[0], 7.0f);
}

}  // namespace
}  // namespace bertfit

namespace bertfit {
namespace {

// bf16 products: inputs are rounded to bf16 first, so the reference is the fp32 product of
// the rounded values; the products of two bf16 numbers are exact in fp32 and the sums are
// accumulated in fp32, so the same tolerance as the fp32 test applies.
TEST(Gemm, Bf16LinearMatchesFp32OfRoundedInputs) {
  std::mt19937 rng(3);
  auto round_vec = [](std::vector<float>& v, std::vector<std::uint16_t>& out) {
    out.resize(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      out[i] = f32_to_bf16(v[i]);
      v[i] = bf16_to_f32(out[i]);
    }
  };
  // (301, 96, 130): long enough a reduction that the weight gradient lays x out (blocked).
  for (auto [M, K, N] : {std::tuple{1, 1, 1}, {7, 64, 65}, {65, 768, 33}, {301, 96, 130}}) {
    auto x = random_vec(M * K, rng), w = random_vec(N * K, rng), dy = random_vec(M * N, rng);
    auto bias = random_vec(N, rng);
    std::vector<std::uint16_t> xb, wb, dyb;
    round_vec(x, xb);
    round_vec(w, wb);
    round_vec(dy, dyb);
    std::vector<float> y(M * N), y_ref(M * N);
    linear_forward_bf16(y.data(), xb.data(), wb.data(), bias.data(), M, K, N);
    linear_forward(y_ref.data(), x.data(), w.data(), bias.data(), M, K, N);
    expect_close(y, y_ref, K);
    // bf16 output: the fp32 result rounded once. The two computations may sum in different
    // orders, so allow one bf16 step where the fp32 sums straddle a rounding boundary.
    std::vector<std::uint16_t> yb(M * N);
    linear_forward_bf16_out(yb.data(), xb.data(), wb.data(), bias.data(), M, K, N);
    for (int i = 0; i < M * N; ++i) {
      const float got = bf16_to_f32(yb[i]), want = y[i];
      EXPECT_LE(std::fabs(got - want), std::ldexp(std::fabs(want), -8) + 1e-6f * K) << i;
    }
    auto dx = random_vec(M * K, rng);
    auto dx_ref = dx;
    linear_backward_input_bf16(dx.data(), dyb.data(), wb.data(), M, K, N);
    linear_backward_input(dx_ref.data(), dy.data(), w.data(), M, K, N);
    expect_close(dx, dx_ref, N);
    std::vector<float> dx_new(M * K, std::numeric_limits<float>::quiet_NaN()), dx_new_ref(M * K);
    linear_backward_input_bf16(dx_new.data(), dyb.data(), wb.data(), M, K, N, Output::kOverwrite);
    linear_backward_input(dx_new_ref.data(), dy.data(), w.data(), M, K, N, Output::kOverwrite);
    expect_close(dx_new, dx_new_ref, N);
    auto dw = random_vec(N * K, rng);
    auto dw_ref = dw;
    linear_backward_weight_bf16(dw.data(), dyb.data(), xb.data(), M, K, N);
    linear_backward_weight(dw_ref.data(), dy.data(), x.data(), M, K, N);
    expect_close(dw, dw_ref, M);
  }
}

// A prepared weight rounds the fp32 weight itself (to nearest even, as f32_to_bf16) and serves
// products of any M, forward and backward-input, as the plain bf16 weight does.
TEST(Gemm, PreparedBf16WeightMatchesFp32OfRoundedInputs) {
  std::mt19937 rng(5);
  for (auto [K, N] : {std::pair{1, 1}, {64, 65}, {768, 33}, {130, 2}}) {
    const auto w = random_vec(N * K, rng);
    std::vector<float> w_rounded(w.size());
    for (std::size_t i = 0; i < w.size(); ++i) w_rounded[i] = bf16_to_f32(f32_to_bf16(w[i]));
    PreparedWeightBf16 pw;
    pw.prepare(w.data(), N, K, /*with_backward=*/false);
    EXPECT_FALSE(pw.has_backward());
    pw.prepare(w.data(), N, K, /*with_backward=*/true);
    ASSERT_TRUE(pw.has_backward());
    EXPECT_EQ(pw.N(), N);
    EXPECT_EQ(pw.K(), K);
    for (int M : {1, 7, 300}) {
      SCOPED_TRACE(::testing::Message() << "M=" << M << " K=" << K << " N=" << N);
      auto x = random_vec(M * K, rng), dy = random_vec(M * N, rng), bias = random_vec(N, rng);
      std::vector<std::uint16_t> xb(x.size()), dyb(dy.size());
      for (std::size_t i = 0; i < x.size(); ++i) x[i] = bf16_to_f32(xb[i] = f32_to_bf16(x[i]));
      for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = bf16_to_f32(dyb[i] = f32_to_bf16(dy[i]));
      std::vector<float> y(M * N), y_ref(M * N);
      linear_forward_bf16(y.data(), xb.data(), pw, bias.data(), M);
      linear_forward(y_ref.data(), x.data(), w_rounded.data(), bias.data(), M, K, N);
      expect_close(y, y_ref, K);
      std::vector<std::uint16_t> yb(M * N);
      linear_forward_bf16_out(yb.data(), xb.data(), pw, bias.data(), M);
      for (int i = 0; i < M * N; ++i) {
        const float got = bf16_to_f32(yb[i]), want = y[i];
        EXPECT_LE(std::fabs(got - want), std::ldexp(std::fabs(want), -8) + 1e-6f * K) << i;
      }
      auto dx = random_vec(M * K, rng);
      auto dx_ref = dx;
      linear_backward_input_bf16(dx.data(), dyb.data(), pw, M);
      linear_backward_input(dx_ref.data(), dy.data(), w_rounded.data(), M, K, N);
      expect_close(dx, dx_ref, N);
      std::vector<float> dx_new(M * K, std::numeric_limits<float>::quiet_NaN());
      linear_backward_input_bf16(dx_new.data(), dyb.data(), pw, M, Output::kOverwrite);
      std::vector<float> dx_new_ref(M * K);
      linear_backward_input(dx_new_ref.data(), dy.data(), w_rounded.data(), M, K, N,
                            Output::kOverwrite);
      expect_close(dx_new, dx_new_ref, N);
      std::vector<std::uint16_t> dxb(M * K);
      linear_backward_input_bf16_out(dxb.data(), dyb.data(), pw, M);
      for (int i = 0; i < M * K; ++i) {  // one rounding of the fp32 sum (as the forward's)
        const float got = bf16_to_f32(dxb[i]), want = dx_new[i];
        EXPECT_LE(std::fabs(got - want), std::ldexp(std::fabs(want), -8) + 1e-6f * N) << i;
      }
    }
  }
}

// Preparing again reads the new values (and a new shape re-lays out); a forward-only prepare
// leaves no stale backward copy usable.
TEST(Gemm, PreparedBf16WeightFollowsUpdates) {
  std::mt19937 rng(6);
  const int M = 3, K = 32, N = 16;
  PreparedWeightBf16 pw;
  const auto x = random_vec(M * K, rng);
  std::vector<std::uint16_t> xb(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) xb[i] = f32_to_bf16(x[i]);
  std::vector<float> y1(M * N), y2(M * N), w(N * K, 1.0f);
  pw.prepare(w.data(), N, K, true);
  linear_forward_bf16(y1.data(), xb.data(), pw, nullptr, M);
  for (auto& v : w) v = 2.0f;
  pw.prepare(w.data(), N, K, false);
  EXPECT_FALSE(pw.has_backward());
  linear_forward_bf16(y2.data(), xb.data(), pw, nullptr, M);
  for (int i = 0; i < M * N; ++i) EXPECT_EQ(y2[i], 2.0f * y1[i]) << i;
  std::vector<float> w2(8 * 4, 1.0f), y3(M * 8);
  std::vector<std::uint16_t> x3(M * 4, f32_to_bf16(1.0f));
  pw.prepare(w2.data(), 8, 4, true);
  linear_forward_bf16(y3.data(), x3.data(), pw, nullptr, M);
  for (float v : y3) EXPECT_EQ(v, 4.0f);
}

}  // namespace
}  // namespace bertfit

namespace bertfit {
namespace {

TEST(Int8, RowQuantizationRoundTripsWithinHalfAStep) {
  std::mt19937 rng(4);
  const std::int64_t M = 5, K = 37;
  std::vector<float> x = random_vec(M * K, rng);
  for (std::int64_t k = 0; k < K; ++k) {
    x[1 * K + k] = 0.25f;                     // constant positive row: range [0, 0.25]
    x[2 * K + k] = -std::fabs(x[2 * K + k]);  // all negative: zero point 255
    x[3 * K + k] = 0.0f;                      // all zero
  }
  x[4 * K + 3] = 0.0f;
  std::vector<std::uint8_t> q(M * K);
  std::vector<float> scale(M);
  std::vector<std::int32_t> zero(M);
  quantize_rows_u8(q.data(), scale.data(), zero.data(), x.data(), M, K);
  for (std::int64_t m = 0; m < M; ++m) {
    ASSERT_GT(scale[m], 0.0f);
    ASSERT_GE(zero[m], 0);
    ASSERT_LE(zero[m], 255);
    for (std::int64_t k = 0; k < K; ++k) {
      const float back = scale[m] * (static_cast<float>(q[m * K + k]) - zero[m]);
      EXPECT_LE(std::fabs(back - x[m * K + k]), 0.5f * scale[m] * 1.0001f) << m << "," << k;
      if (x[m * K + k] == 0.0f) {
        EXPECT_EQ(back, 0.0f);  // zero is exact
      }
    }
  }
  EXPECT_EQ(zero[2], 255);
  EXPECT_EQ(zero[1], 0);
}

TEST(Int8, WeightsQuantizedPerOutputChannel) {
  std::mt19937 rng(5);
  const std::int64_t N = 9, K = 70;
  std::vector<float> w = random_vec(N * K, rng);
  for (std::int64_t k = 0; k < K; ++k) w[4 * K + k] *= 100.0f;  // one channel far larger
  for (std::int64_t k = 0; k < K; ++k) w[6 * K + k] = 0.0f;     // and one all zero
  PreparedWeightInt8 p;
  p.prepare(w.data(), N, K);
  const std::vector<std::int8_t> wq = p.quantized();
  for (std::int64_t n = 0; n < N; ++n) {
    int amax = 0;
    for (std::int64_t k = 0; k < K; ++k) {
      const int q = wq[n * K + k];
      amax = std::max(amax, std::abs(q));
      EXPECT_LE(std::fabs(q * p.scales()[n] - w[n * K + k]), 0.5f * p.scales()[n] * 1.0001f);
    }
    EXPECT_EQ(amax, n == 6 ? 0 : 127) << n;  // each channel uses its whole range
  }
}

// The product is exact integer arithmetic on the quantized operands, then one fp32
// dequantization: compare with the double product of the dequantized operands (tight), and
// with the fp32 product of the original ones (within quantization error).
TEST(Int8, LinearForwardIsTheProductOfTheQuantizedOperands) {
  if (!has_int8_vnni()) GTEST_SKIP() << "no VNNI on this CPU";
  std::mt19937 rng(6);
  for (auto [M, K, N] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{1, 768, 768},
                         {3, 37, 19},
                         {64, 768, 2304},
                         {130, 96, 384},
                         {7, 3072, 768},
                         {2500, 40, 24}}) {  // over the 1024-row blocks, with a partial one
    std::vector<float> x = random_vec(M * K, rng), w = random_vec(N * K, rng),
                       b = random_vec(N, rng), y(M * N), y_nobias(M * N);
    for (float& v : x) v = v * 0.5f + 0.3f;  // an off-centre range, as after GELU
    PreparedWeightInt8 p;
    p.prepare(w.data(), N, K);
    linear_forward_int8(y.data(), x.data(), p, b.data(), M);
    linear_forward_int8(y_nobias.data(), x.data(), p, nullptr, M);
    const std::vector<std::int8_t> wq = p.quantized();
    std::vector<std::uint8_t> q(M * K);
    std::vector<float> sx(M);
    std::vector<std::int32_t> zx(M);
    quantize_rows_u8(q.data(), sx.data(), zx.data(), x.data(), M, K);
    double err_q = 0, err_f = 0, norm = 0;
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t n = 0; n < N; ++n) {
        double dq = 0, full = 0;
        for (std::int64_t k = 0; k < K; ++k) {
          dq += (double{sx[m]} * (q[m * K + k] - zx[m])) * (double{p.scales()[n]} * wq[n * K + k]);
          full += double{x[m * K + k]} * w[n * K + k];
        }
        err_q = std::max(err_q, std::fabs(y[m * N + n] - (dq + b[n])));
        ASSERT_NEAR(y[m * N + n] - b[n], y_nobias[m * N + n], 1e-4 * (1 + std::fabs(dq)));
        err_f += std::pow(y[m * N + n] - (full + b[n]), 2);
        norm += std::pow(full + b[n], 2);
      }
    double scale = 0;
    for (float v : y) scale = std::max(scale, double{std::fabs(v)});
    EXPECT_LT(err_q / scale, 1e-5) << M << "x" << K << "x" << N;
    EXPECT_LT(std::sqrt(err_f / norm), 2e-2) << M << "x" << K << "x" << N;
  }
}

// From an input quantized beforehand (as an epilogue of the kernel that made it does, a block
// of rows at a time), the product gives the same bits as from the fp32 input; `then` sees every
// row once, after its dequantization, on the threads of that pass.
TEST(Int8, PreQuantizedInputAndRowEpilogue) {
  if (!has_int8_vnni()) GTEST_SKIP() << "no VNNI on this CPU";
  std::mt19937 rng(7);
  for (auto [M, K, N] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{1, 768, 768},
                         {64, 768, 3072},
                         {2500, 40, 24}}) {  // over the 1024-row blocks, with a partial one
    std::vector<float> x = random_vec(M * K, rng), w = random_vec(N * K, rng),
                       b = random_vec(N, rng), y(M * N), y_q(M * N), y_epi(M * N);
    PreparedWeightInt8 p;
    p.prepare(w.data(), N, K);
    linear_forward_int8(y.data(), x.data(), p, b.data(), M);
    std::vector<std::uint8_t> q(M * K);
    std::vector<float> sx(M);
    std::vector<std::int32_t> zx(M);
    const QuantizedRows xq{q.data(), sx.data(), zx.data()};
    const std::int64_t half = M / 2;  // quantized in two calls, as two threads' rows
    quantize_rows_u8(xq, x.data(), K, 0, half);
    quantize_rows_u8(xq, x.data(), K, half, M);
    std::vector<int> seen(M, 0);
    std::vector<float> copied(M * N, -1.0f);
    linear_forward_int8(y_q.data(), xq, p, b.data(), M, [&](std::int64_t m0, std::int64_t m1) {
      for (std::int64_t m = m0; m < m1; ++m) {
        ++seen[m];  // rows are disjoint between threads
        std::copy_n(y_q.data() + m * N, N, copied.data() + m * N);
      }
    });
    EXPECT_EQ(y_q, y) << M << "x" << K << "x" << N;
    EXPECT_EQ(copied, y) << "the epilogue ran before its rows were final";
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), M);
    std::fill(seen.begin(), seen.end(), 0);
    linear_forward_int8(y_epi.data(), x.data(), p, b.data(), M,
                        [&](std::int64_t m0, std::int64_t m1) {
                          for (std::int64_t m = m0; m < m1; ++m) ++seen[m];
                        });
    EXPECT_EQ(y_epi, y);
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), M);
  }
}

}  // namespace
}  // namespace bertfit
