// LayerNorm: fast float kernel against the double reference over awkward sizes and unaligned
// views; aliasing; thread-count independence of the backward.
#include "kernels/layernorm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "base/parallel.h"
#include "kernels/ref/ref.h"
#include "kernels/test_util.h"

namespace bertfit {
namespace {

using testing::all_close;
using testing::FloatView;
using testing::kU;
using testing::Rng;

constexpr float kEps = 1e-12f;  // BERT / DistilBERT layer_norm_eps

struct Case {
  std::int64_t N;
  int C;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (std::int64_t N : {1, 3, 17}) {
    for (int C : {1, 7, 63, 64, 65, 767, 768, 769}) out.push_back({N, C});
  }
  out.push_back({33, 768});  // N·C > 16K: the multi-threaded path
  return out;
}

TEST(LayerNorm, ForwardMatchesReference) {
  for (const Case& k : cases()) {
    SCOPED_TRACE(::testing::Message() << "N=" << k.N << " C=" << k.C);
    const std::int64_t n = k.N * k.C;
    Rng rng(k.N * 1000 + k.C);
    FloatView x(n), w(k.C), b(k.C), y(n), mean(k.N), rstd(k.N);
    x.fill_uniform(rng, 1.0, 3.0);  // mean ≈ 2: exercises the mean subtraction
    w.fill_uniform(rng, 0.5, 1.5);
    b.fill_uniform(rng, -0.5, 0.5);
    layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), k.N, k.C,
                      kEps);
    std::vector<double> ry(n), rmean(k.N), rrstd(k.N);
    ref::layernorm_forward(ry.data(), rmean.data(), rrstd.data(), x.to_double().data(),
                           w.to_double().data(), b.to_double().data(), k.N, k.C, kEps);
    // mean and rstd are computed in double and rounded once to float: error <= u·|value|
    // (the double error, ~C·2^-53 relative, is negligible); 2u leaves margin.
    EXPECT_TRUE(all_close(mean.data(), rmean.data(), k.N,
                          [&](std::int64_t r) { return 2 * kU * std::fabs(rmean[r]); }));
    EXPECT_TRUE(all_close(rstd.data(), rrstd.data(), k.N,
                          [&](std::int64_t r) { return 2 * kU * rrstd[r]; }));
    // y = ((x - m)·rs)·w + b in float with m, rs off by u relative: to first order
    // |δy| <= |w|·(u·rstd·|mean| + 4u·|xhat|) + u·|y| (the rounded mean shifts x - m by
    // u·|mean|; four roundings touch xhat·w; one the sum). Factor 2 for second order.
    EXPECT_TRUE(all_close(y.data(), ry.data(), n, [&](std::int64_t i) {
      const std::int64_t r = i / k.C;
      const int c = static_cast<int>(i % k.C);
      const double xhat = (x[i] - rmean[r]) * rrstd[r];
      return 2 * kU *
             (w[c] * (rrstd[r] * std::fabs(rmean[r]) + 4 * std::fabs(xhat)) + std::fabs(ry[i]));
    }));
  }
}

TEST(LayerNorm, ForwardInPlaceEqualsOutOfPlace) {
  const std::int64_t N = 5;
  const int C = 65;
  Rng rng(7);
  FloatView x(N * C), w(C), b(C), y(N * C), mean(N), rstd(N);
  x.fill_uniform(rng, -2, 2);
  w.fill_uniform(rng, 0.5, 1.5);
  b.fill_uniform(rng, -1, 1);
  layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, kEps);
  layernorm_forward(x.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, kEps);
  EXPECT_EQ(0, std::memcmp(x.data(), y.data(), sizeof(float) * N * C));
}

TEST(LayerNorm, BackwardMatchesReference) {
  for (const Case& k : cases()) {
    SCOPED_TRACE(::testing::Message() << "N=" << k.N << " C=" << k.C);
    const std::int64_t n = k.N * k.C;
    Rng rng(k.N * 7919 + k.C);
    FloatView x(n), w(k.C), b(k.C), y(n), mean(k.N), rstd(k.N), dout(n), dx(n), dw(k.C), db(k.C);
    x.fill_uniform(rng, 1.0, 3.0);
    w.fill_uniform(rng, 0.5, 1.5);
    b.fill_uniform(rng, -0.5, 0.5);
    dout.fill_uniform(rng, -1, 1);
    // dx is written (NaN before: every element must be overwritten); the parameter gradients
    // start nonzero: the kernel must accumulate them.
    dx.fill(std::numeric_limits<float>::quiet_NaN());
    dw.fill_uniform(rng, -1, 1);
    db.fill_uniform(rng, -1, 1);
    layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), k.N, k.C,
                      kEps);
    // The reference gets the same inputs, including the float mean and rstd the kernel saved.
    std::vector<double> rdx(n), rdw = dw.to_double(), rdb = db.to_double();
    const std::vector<double> xd = x.to_double(), wd = w.to_double(), gd = dout.to_double();
    const std::vector<double> md = mean.to_double(), sd = rstd.to_double();
    ref::layernorm_backward(rdx.data(), rdw.data(), rdb.data(), gd.data(), xd.data(), wd.data(),
                            md.data(), sd.data(), k.N, k.C);
    const std::vector<double> dw0 = dw.to_double(), db0 = db.to_double();
    layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(),
                       mean.data(), rstd.data(), k.N, k.C);

    // Per row: xhat in float is off by e <= u·(rstd·|mean| + 3|xhat|) =: u·E·(...); g = dout·w
    // by u|g|; the row means mg, mgx are double sums of those float terms, rounded once. In
    // dx = rs·(g - mg - xhat·mgx) the first-order error is at most
    // rs·u·[4G + 4|mg| + X·(4|mgx| + G·(E + X)) + |mgx|·E] + 2u·|dx| (G = max|g|, X = max|xhat|,
    // E = rstd·|mean| + 3X); factor 2 for second order.
    std::vector<double> row_tol(k.N);
    for (std::int64_t r = 0; r < k.N; ++r) {
      double G = 0, X = 0, mg = 0, mgx = 0;
      for (int c = 0; c < k.C; ++c) {
        const double xhat = (xd[r * k.C + c] - md[r]) * sd[r];
        const double g = gd[r * k.C + c] * wd[c];
        G = std::max(G, std::fabs(g));
        X = std::max(X, std::fabs(xhat));
        mg += g / k.C;
        mgx += g * xhat / k.C;
      }
      const double E = sd[r] * std::fabs(md[r]) + 3 * X;
      row_tol[r] =
          2 * kU * sd[r] *
          (4 * G + 4 * std::fabs(mg) + X * (4 * std::fabs(mgx) + G * (E + X)) + std::fabs(mgx) * E);
    }
    EXPECT_TRUE(all_close(dx.data(), rdx.data(), n, [&](std::int64_t i) {
      return row_tol[i / k.C] + 2 * kU * std::fabs(rdx[i]);
    }));
    // dweight_c = Σ_r dout·xhat: each term off by |dout|·e_r, the double sum exact to ~2^-53,
    // then one rounding to float and one float add to the initial value.
    std::vector<double> dw_tol(k.C, 0.0);
    for (std::int64_t r = 0; r < k.N; ++r) {
      for (int c = 0; c < k.C; ++c) {
        const double xhat = (xd[r * k.C + c] - md[r]) * sd[r];
        dw_tol[c] +=
            std::fabs(gd[r * k.C + c]) * kU * (sd[r] * std::fabs(md[r]) + 3 * std::fabs(xhat));
      }
    }
    EXPECT_TRUE(all_close(dw.data(), rdw.data(), k.C, [&](std::int64_t c) {
      return 2 * dw_tol[c] + 2 * kU * (std::fabs(rdw[c]) + std::fabs(dw0[c]));
    }));
    // dbias_c: an exact-to-2^-53 double sum of floats, rounded once, then one float add.
    EXPECT_TRUE(all_close(db.data(), rdb.data(), k.C, [&](std::int64_t c) {
      return 2 * kU * (std::fabs(rdb[c]) + std::fabs(db0[c]));
    }));
  }
}

TEST(LayerNorm, BackwardIsIndependentOfThreadCount) {
  const std::int64_t N = 200;  // several chunks of partial sums, the last one partial
  const int C = 769;
  Rng rng(11);
  FloatView x(N * C), w(C), b(C), y(N * C), mean(N), rstd(N), dout(N * C);
  x.fill_uniform(rng, -1, 1);
  w.fill_uniform(rng, 0.5, 1.5);
  b.fill_uniform(rng, -1, 1);
  dout.fill_uniform(rng, -1, 1);
  layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, kEps);
  const int saved = num_threads();
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    FloatView dx(N * C), dw(C), db(C);
    dx.fill(0.5f);
    dw.fill(0.25f);
    db.fill(-0.25f);
    layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(),
                       mean.data(), rstd.data(), N, C);
    std::vector<float> all(dx.data(), dx.data() + N * C);
    all.insert(all.end(), dw.data(), dw.data() + C);
    all.insert(all.end(), db.data(), db.data() + C);
    results.push_back(all);
  }
  set_num_threads(saved);
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

}  // namespace
}  // namespace bertfit
