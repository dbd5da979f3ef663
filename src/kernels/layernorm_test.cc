// LayerNorm: fast float kernel against the double reference over awkward sizes and unaligned
// views; aliasing; thread-count independence of the backward.
#include "kernels/layernorm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "base/dtype.h"
#include "base/parallel.h"
#include "kernels/dropout.h"
#include "kernels/elementwise.h"
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

// Plain and fused (with dropout and the bias gradient): the same bits for 1, 2 and 3 threads.
TEST(LayerNorm, BackwardIsIndependentOfThreadCount) {
  const std::int64_t N = 200;  // several chunks of partial sums, the last one partial
  const int C = 769;
  const std::uint64_t key = dropout_key(1, 1, 0, 4, 1);
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
    FloatView dx(N * C), dw(C), db(C), fdx(N * C), fdw(C), fdb(C), dy(N * C), yb(C);
    dx.fill(0.5f);
    for (FloatView* v : {&dw, &fdw}) v->fill(0.25f);
    for (FloatView* v : {&db, &fdb}) v->fill(-0.25f);
    yb.fill(0.125f);
    layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(),
                       mean.data(), rstd.data(), N, C);
    layernorm_dropout_bias_backward(fdx.data(), fdw.data(), fdb.data(), dy.data(), nullptr,
                                    yb.data(), dout.data(), x.data(), w.data(), mean.data(),
                                    rstd.data(), N, C, 0.1f, key);
    std::vector<float> all;
    for (const FloatView* v : {&dx, &fdx, &dy}) all.insert(all.end(), v->data(), v->data() + N * C);
    for (const FloatView* v : {&dw, &db, &fdw, &fdb, &yb}) {
      all.insert(all.end(), v->data(), v->data() + C);
    }
    results.push_back(all);
  }
  set_num_threads(saved);
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

// The fused sublayer ending against the kernels it replaces, run in turn: the same arithmetic
// in the same order, so the same bits (the unfused chain is checked against the references
// above and in the dropout and elementwise tests).
TEST(DropoutAddLayerNorm, ForwardEqualsTheUnfusedKernels) {
  for (float p : {0.0f, 0.1f}) {
    for (const Case& k : cases()) {
      SCOPED_TRACE(::testing::Message() << "p=" << p << " N=" << k.N << " C=" << k.C);
      const std::int64_t n = k.N * k.C;
      const std::uint64_t key = dropout_key(3, 5, 0, 1, 2);
      Rng rng(k.N * 31 + k.C);
      FloatView y(n), x(n), w(k.C), b(k.C);
      y.fill_uniform(rng, -2, 2);
      x.fill_uniform(rng, -1, 3);
      w.fill_uniform(rng, 0.5, 1.5);
      b.fill_uniform(rng, -0.5, 0.5);
      FloatView y0(n);  // y as it was (the in-place call below overwrites y)
      std::copy(y.data(), y.data() + n, y0.data());
      FloatView res(n), out(n), mean(k.N), rstd(k.N);
      dropout_forward(res.data(), y.data(), n, p, key);
      add_forward(res.data(), res.data(), x.data(), n);
      layernorm_forward(out.data(), mean.data(), rstd.data(), res.data(), w.data(), b.data(), k.N,
                        k.C, kEps);
      FloatView fres(n), fout(n), fmean(k.N), frstd(k.N);
      dropout_add_layernorm_forward(fout.data(), fres.data(), fmean.data(), frstd.data(), y.data(),
                                    x.data(), w.data(), b.data(), k.N, k.C, kEps, p, key);
      EXPECT_EQ(0, std::memcmp(fres.data(), res.data(), sizeof(float) * n));
      EXPECT_EQ(0, std::memcmp(fout.data(), out.data(), sizeof(float) * n));
      EXPECT_EQ(0, std::memcmp(fmean.data(), mean.data(), sizeof(float) * k.N));
      EXPECT_EQ(0, std::memcmp(frstd.data(), rstd.data(), sizeof(float) * k.N));
      // res in place of y, as the layer calls it.
      dropout_add_layernorm_forward(fout.data(), y.data(), fmean.data(), frstd.data(), y.data(),
                                    x.data(), w.data(), b.data(), k.N, k.C, kEps, p, key);
      EXPECT_EQ(0, std::memcmp(y.data(), res.data(), sizeof(float) * n));
      EXPECT_EQ(0, std::memcmp(fout.data(), out.data(), sizeof(float) * n));
      // In two calls on parts of the rows (as a product's epilogue makes them), first_row
      // keeping the dropout stream's numbering.
      const std::int64_t half = k.N / 2, rest = k.N - half;
      FloatView pres(n), pout(n), pmean(k.N), prstd(k.N);
      dropout_add_layernorm_forward(pout.data(), pres.data(), pmean.data(), prstd.data(), y0.data(),
                                    x.data(), w.data(), b.data(), half, k.C, kEps, p, key);
      dropout_add_layernorm_forward(pout.data() + half * k.C, pres.data() + half * k.C,
                                    pmean.data() + half, prstd.data() + half,
                                    y0.data() + half * k.C, x.data() + half * k.C, w.data(),
                                    b.data(), rest, k.C, kEps, p, key, half);
      EXPECT_EQ(0, std::memcmp(pres.data(), res.data(), sizeof(float) * n));
      EXPECT_EQ(0, std::memcmp(pout.data(), out.data(), sizeof(float) * n));
      EXPECT_EQ(0, std::memcmp(prstd.data(), rstd.data(), sizeof(float) * k.N));
    }
  }
}

TEST(LayerNormDropoutBias, BackwardEqualsTheUnfusedKernels) {
  for (float p : {0.0f, 0.1f}) {
    for (const Case& k : cases()) {
      SCOPED_TRACE(::testing::Message() << "p=" << p << " N=" << k.N << " C=" << k.C);
      const std::int64_t n = k.N * k.C;
      const std::uint64_t key = dropout_key(9, 2, 1, 0, 3);
      Rng rng(k.N * 131 + k.C);
      FloatView res(n), w(k.C), b(k.C), out(n), mean(k.N), rstd(k.N), dout(n);
      res.fill_uniform(rng, 1.0, 3.0);
      w.fill_uniform(rng, 0.5, 1.5);
      b.fill_uniform(rng, -0.5, 0.5);
      dout.fill_uniform(rng, -1, 1);
      layernorm_forward(out.data(), mean.data(), rstd.data(), res.data(), w.data(), b.data(), k.N,
                        k.C, kEps);
      // The chain: LayerNorm's backward, dropout's, the bias gradient with the bf16 cast.
      FloatView dres(n), dw(k.C), db(k.C), dy(n), yb(k.C);
      dw.fill(0.5f);
      db.fill(-0.5f);
      yb.fill(0.25f);
      std::vector<std::uint16_t> dy16(n);
      layernorm_backward(dres.data(), dw.data(), db.data(), dout.data(), res.data(), w.data(),
                         mean.data(), rstd.data(), k.N, k.C);
      dropout_backward(dy.data(), dres.data(), n, p, key);
      bias_backward_cast(yb.data(), dy16.data(), dy.data(), k.N, k.C);
      // Fused, with every output asked for (dres NaN before: it must be written).
      FloatView fdres(n), fdw(k.C), fdb(k.C), fdy(n), fyb(k.C);
      fdres.fill(std::numeric_limits<float>::quiet_NaN());
      fdw.fill(0.5f);
      fdb.fill(-0.5f);
      fyb.fill(0.25f);
      std::vector<std::uint16_t> fdy16(n);
      layernorm_dropout_bias_backward(fdres.data(), fdw.data(), fdb.data(), fdy.data(),
                                      fdy16.data(), fyb.data(), dout.data(), res.data(), w.data(),
                                      mean.data(), rstd.data(), k.N, k.C, p, key);
      EXPECT_EQ(0, std::memcmp(fdres.data(), dres.data(), sizeof(float) * n));
      EXPECT_EQ(0, std::memcmp(fdw.data(), dw.data(), sizeof(float) * k.C));
      EXPECT_EQ(0, std::memcmp(fdb.data(), db.data(), sizeof(float) * k.C));
      EXPECT_EQ(0, std::memcmp(fdy.data(), dy.data(), sizeof(float) * n));
      EXPECT_EQ(fdy16, dy16);
      // The bias gradient: both are double sums of the same floats (in other orders, error
      // ~N·2^-53 relative to Σ|dy|), rounded once to float, then one float add to 0.25.
      std::vector<double> col_abs(k.C, 0.0);
      for (std::int64_t i = 0; i < n; ++i) col_abs[i % k.C] += std::fabs(dy.data()[i]);
      const std::vector<double> want = yb.to_double();
      EXPECT_TRUE(all_close(fyb.data(), want.data(), k.C, [&](std::int64_t c) {
        return 2 * kU * (std::fabs(want[c]) + 0.25 + col_abs[c]);
      }));
      // Only the bf16 form (the bf16 products' case), and the fp32 form alone.
      FloatView gdres(n), gdw(k.C), gdb(k.C), gyb(k.C);
      gyb.fill(0.25f);
      std::vector<std::uint16_t> gdy16(n);
      layernorm_dropout_bias_backward(gdres.data(), gdw.data(), gdb.data(), nullptr, gdy16.data(),
                                      gyb.data(), dout.data(), res.data(), w.data(), mean.data(),
                                      rstd.data(), k.N, k.C, p, key);
      EXPECT_EQ(gdy16, dy16);
      EXPECT_EQ(0, std::memcmp(gyb.data(), fyb.data(), sizeof(float) * k.C));
      FloatView hdy(n);
      layernorm_dropout_bias_backward(gdres.data(), gdw.data(), gdb.data(), hdy.data(), nullptr,
                                      nullptr, dout.data(), res.data(), w.data(), mean.data(),
                                      rstd.data(), k.N, k.C, p, key);
      EXPECT_EQ(0, std::memcmp(hdy.data(), dy.data(), sizeof(float) * n));
      if (p == 0.0f) {
        // Without dropout fp32's dy may be dres itself.
        FloatView adw(k.C), adb(k.C);
        layernorm_dropout_bias_backward(gdres.data(), adw.data(), adb.data(), gdres.data(), nullptr,
                                        nullptr, dout.data(), res.data(), w.data(), mean.data(),
                                        rstd.data(), k.N, k.C, p, key);
        EXPECT_EQ(0, std::memcmp(gdres.data(), dres.data(), sizeof(float) * n));
      }
    }
  }
}

}  // namespace
}  // namespace bertfit
