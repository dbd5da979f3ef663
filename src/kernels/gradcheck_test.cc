// Finite-difference checks of every backward except attention (see
// gradcheck_attention_test.cc): central differences of the double REFERENCE forward against
// the reference backward, then the fast float backward against the reference backward.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/gradcheck_util.h"
#include "kernels/kernels.h"
#include "kernels/ref/ref.h"

namespace bertfit {
namespace {

using namespace bertfit::testing;

TEST(GradCheck, LayerNorm) {
  for (auto [N, C] : {std::pair<int, int>{3, 7}, {2, 64}}) {
    SCOPED_TRACE(::testing::Message() << "N=" << N << " C=" << C);
    Rng rng(N * 10 + C);
    const std::vector<float> xf = random_floats(rng, N * C, -2, 2),
                             wf = random_floats(rng, C, 0.5, 1.5),
                             bf = random_floats(rng, C, -1, 1),
                             gf = random_floats(rng, N * C, -1, 1);
    std::vector<double> x = as_double(xf), w = as_double(wf), b = as_double(bf);
    const std::vector<double> dout = as_double(gf);
    const double eps = 1e-5;
    std::vector<double> y(N * C), mean(N), rstd(N);
    auto loss = [&] {
      ref::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C,
                             eps);
      return weighted_sum(dout, y);
    };
    loss();
    std::vector<double> dx(N * C, 0.0), dw(C, 0.0), db(C, 0.0);
    ref::layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(),
                            mean.data(), rstd.data(), N, C);
    EXPECT_TRUE(gradients_match(dx, numeric_gradient(x, loss)));
    EXPECT_TRUE(gradients_match(dw, numeric_gradient(w, loss)));
    EXPECT_TRUE(gradients_match(db, numeric_gradient(b, loss)));

    std::vector<float> yf(N * C), mf(N), sf(N), dxf(N * C, 0.0f), dwf(C, 0.0f), dbf(C, 0.0f);
    layernorm_forward(yf.data(), mf.data(), sf.data(), xf.data(), wf.data(), bf.data(), N, C,
                      static_cast<float>(eps));
    layernorm_backward(dxf.data(), dwf.data(), dbf.data(), gf.data(), xf.data(), wf.data(),
                       mf.data(), sf.data(), N, C);
    EXPECT_TRUE(fast_matches_reference(dxf.data(), dx, C));
    EXPECT_TRUE(fast_matches_reference(dwf.data(), dw, N));
    EXPECT_TRUE(fast_matches_reference(dbf.data(), db, N));
  }
}

TEST(GradCheck, Activations) {
  for (ActKind kind : {ActKind::kGelu, ActKind::kGeluNew, ActKind::kRelu, ActKind::kTanh}) {
    SCOPED_TRACE(static_cast<int>(kind));
    const int n = 64;
    Rng rng(static_cast<int>(kind) + 1);
    std::vector<float> xf = random_floats(rng, n, -4, 4);
    for (float& v : xf) {
      if (std::fabs(v) < 1e-2f) v = 0.5f;  // keep ReLU's kink away from the ±h stencil
    }
    const std::vector<float> gf = random_floats(rng, n, -1, 1);
    std::vector<double> x = as_double(xf), y(n);
    const std::vector<double> dout = as_double(gf);
    auto loss = [&] {
      ref::activation_forward(kind, y.data(), x.data(), n);
      return weighted_sum(dout, y);
    };
    loss();
    std::vector<double> dx(n, 0.0);
    ref::activation_backward(kind, dx.data(), dout.data(), x.data(), y.data(), n);
    EXPECT_TRUE(gradients_match(dx, numeric_gradient(x, loss)));

    std::vector<float> yf(n), dxf(n, 0.0f);
    activation_forward(kind, yf.data(), xf.data(), n);
    activation_backward(kind, dxf.data(), gf.data(), xf.data(), yf.data(), n);
    EXPECT_TRUE(fast_matches_reference(dxf.data(), dx, 8));  // ~8 roundings, no reduction
  }
}

// res = x + Drop(y + yb), out = LN(res), with yb a bias added to every row of y: the fused
// backward's dres is x's gradient, dy is y's and ybias is yb's.
TEST(GradCheck, DropoutAddLayerNormAndBias) {
  const int N = 3, C = 16;
  const float p = 0.25f;
  const std::uint64_t key = dropout_key(5, 3, 0, 1, 2);
  Rng rng(17);
  const std::vector<float> yf = random_floats(rng, N * C, -2, 2),
                           xf = random_floats(rng, N * C, -1, 1),
                           wf = random_floats(rng, C, 0.5, 1.5), bf = random_floats(rng, C, -1, 1),
                           gf = random_floats(rng, N * C, -1, 1);
  std::vector<double> y = as_double(yf), x = as_double(xf), w = as_double(wf), b = as_double(bf),
                      yb(C, 0.0);
  const std::vector<double> dout = as_double(gf);
  const double eps = 1e-5;
  std::vector<double> out(N * C), res(N * C), mean(N), rstd(N), ywb(N * C);
  auto loss = [&] {
    for (int i = 0; i < N * C; ++i) ywb[i] = y[i] + yb[i % C];
    ref::dropout_add_layernorm_forward(out.data(), res.data(), mean.data(), rstd.data(), ywb.data(),
                                       x.data(), w.data(), b.data(), N, C, eps, p, key);
    return weighted_sum(dout, out);
  };
  loss();
  std::vector<double> dres(N * C), dw(C, 0.0), db(C, 0.0), dy(N * C), dyb(C, 0.0);
  ref::layernorm_dropout_bias_backward(dres.data(), dw.data(), db.data(), dy.data(), dyb.data(),
                                       dout.data(), res.data(), w.data(), mean.data(), rstd.data(),
                                       N, C, p, key);
  EXPECT_TRUE(gradients_match(dres, numeric_gradient(x, loss)));
  EXPECT_TRUE(gradients_match(dy, numeric_gradient(y, loss)));
  EXPECT_TRUE(gradients_match(dyb, numeric_gradient(yb, loss)));
  EXPECT_TRUE(gradients_match(dw, numeric_gradient(w, loss)));
  EXPECT_TRUE(gradients_match(db, numeric_gradient(b, loss)));

  std::vector<float> of(N * C), rf(N * C), mf(N), sf(N), dresf(N * C), dwf(C, 0.0f), dbf(C, 0.0f),
      dyf(N * C), dybf(C, 0.0f);
  dropout_add_layernorm_forward(of.data(), rf.data(), mf.data(), sf.data(), yf.data(), xf.data(),
                                wf.data(), bf.data(), N, C, static_cast<float>(eps), p, key);
  layernorm_dropout_bias_backward(dresf.data(), dwf.data(), dbf.data(), dyf.data(), nullptr,
                                  dybf.data(), gf.data(), rf.data(), wf.data(), mf.data(),
                                  sf.data(), N, C, p, key);
  EXPECT_TRUE(fast_matches_reference(dresf.data(), dres, C));
  EXPECT_TRUE(fast_matches_reference(dyf.data(), dy, C + 2));
  EXPECT_TRUE(fast_matches_reference(dybf.data(), dyb, C + N));
  EXPECT_TRUE(fast_matches_reference(dwf.data(), dw, N));
  EXPECT_TRUE(fast_matches_reference(dbf.data(), db, N));
}

TEST(GradCheck, Dropout) {
  const int n = 40;
  const float p = 0.3f;
  const std::uint64_t key = dropout_key(7, 1, 0, 2, 0);
  Rng rng(2);
  const std::vector<float> xf = random_floats(rng, n, -1, 1), gf = random_floats(rng, n, -1, 1);
  std::vector<double> x = as_double(xf), y(n);
  const std::vector<double> dout = as_double(gf);
  auto loss = [&] {
    ref::dropout_forward(y.data(), x.data(), n, p, key);
    return weighted_sum(dout, y);
  };
  std::vector<double> dx(n, 0.0);
  ref::dropout_backward(dx.data(), dout.data(), n, p, key);
  EXPECT_TRUE(gradients_match(dx, numeric_gradient(x, loss)));
  std::vector<float> dxf(n, 0.0f);
  dropout_backward(dxf.data(), gf.data(), n, p, key);
  EXPECT_TRUE(fast_matches_reference(dxf.data(), dx, 2));
}

TEST(GradCheck, Embedding) {
  const int N = 8, C = 3, V = 5, P = 8, Tv = 2, pad = 0;
  const std::vector<std::int32_t> ids = {2, 0, 4, 2, 1, 0, 3, 2};  // pad id 0 twice
  const std::vector<std::int32_t> pos = {0, 1, 2, 3, 0, 1, 2, 3};
  const std::vector<std::int32_t> types = {0, 0, 1, 1, 0, 1, 1, 0};
  Rng rng(3);
  std::vector<double> word = as_double(random_floats(rng, V * C, -1, 1));
  std::vector<double> ptab = as_double(random_floats(rng, P * C, -1, 1));
  std::vector<double> ttab = as_double(random_floats(rng, Tv * C, -1, 1));
  const std::vector<float> gf = random_floats(rng, N * C, -1, 1);
  const std::vector<double> dout = as_double(gf);
  std::vector<double> y(N * C);
  auto loss = [&] {
    ref::embedding_forward(y.data(), ids.data(), pos.data(), types.data(), word.data(), ptab.data(),
                           ttab.data(), N, C);
    return weighted_sum(dout, y);
  };
  std::vector<double> dword(V * C, 0.0), dpos(P * C, 0.0), dtype(Tv * C, 0.0);
  ref::embedding_backward(dword.data(), dpos.data(), dtype.data(), dout.data(), ids.data(),
                          pos.data(), types.data(), N, C, pad);
  // The pad row does change the forward (HF adds it too) but gets no gradient (padding_idx):
  // compare every other row with the differences, and the pad row with zero.
  std::vector<double> numeric_word = numeric_gradient(word, loss);
  for (int c = 0; c < C; ++c) {
    EXPECT_EQ(dword[pad * C + c], 0.0);
    EXPECT_NE(numeric_word[pad * C + c], 0.0);
    numeric_word[pad * C + c] = 0.0;
  }
  EXPECT_TRUE(gradients_match(dword, numeric_word));
  EXPECT_TRUE(gradients_match(dpos, numeric_gradient(ptab, loss)));
  EXPECT_TRUE(gradients_match(dtype, numeric_gradient(ttab, loss)));

  std::vector<float> dwf(V * C, 0.0f), dpf(P * C, 0.0f), dtf(Tv * C, 0.0f);
  embedding_backward(dwf.data(), dpf.data(), dtf.data(), gf.data(), ids.data(), pos.data(),
                     types.data(), N, C, pad);
  EXPECT_TRUE(fast_matches_reference(dwf.data(), dword, N));
  EXPECT_TRUE(fast_matches_reference(dpf.data(), dpos, N));
  EXPECT_TRUE(fast_matches_reference(dtf.data(), dtype, N));
}

TEST(GradCheck, BiasAndRows) {
  const int N = 5, M = 6;
  Rng rng(4);
  const std::vector<float> gf = random_floats(rng, N * M, -1, 1);
  const std::vector<double> dout = as_double(gf);
  // y = x + bias broadcast over rows: dL/dbias = column sums of dout.
  std::vector<double> x = as_double(random_floats(rng, N * M, -1, 1));
  std::vector<double> bias = as_double(random_floats(rng, M, -1, 1)), y(N * M);
  auto loss = [&] {
    for (int r = 0; r < N; ++r) {
      for (int c = 0; c < M; ++c) y[r * M + c] = x[r * M + c] + bias[c];
    }
    return weighted_sum(dout, y);
  };
  std::vector<double> dbias(M, 0.0);
  ref::bias_backward(dbias.data(), dout.data(), N, M);
  EXPECT_TRUE(gradients_match(dbias, numeric_gradient(bias, loss)));
  std::vector<float> dbf(M, 0.0f);
  bias_backward(dbf.data(), gf.data(), N, M);
  EXPECT_TRUE(fast_matches_reference(dbf.data(), dbias, N));

  // out = rows of x at row_index (row 1 twice): dL/dx = scatter-add of dout.
  const std::vector<std::int64_t> rows = {4, 1, 1};
  const int R = static_cast<int>(rows.size());
  std::vector<double> out(R * M);
  auto gather_loss = [&] {
    ref::gather_rows(out.data(), x.data(), rows.data(), R, M);
    return weighted_sum(dout, out);  // the first R·M weights
  };
  std::vector<double> dx(N * M, 0.0);
  ref::scatter_add_rows(dx.data(), dout.data(), rows.data(), R, M);
  EXPECT_TRUE(gradients_match(dx, numeric_gradient(x, gather_loss)));
  std::vector<float> dxf(N * M, 0.0f);
  scatter_add_rows(dxf.data(), gf.data(), rows.data(), R, M);
  EXPECT_TRUE(fast_matches_reference(dxf.data(), dx, R));
}

TEST(GradCheck, CrossEntropyMseAndBce) {
  const int B = 3, K = 4;
  const double scale = 0.5;
  Rng rng(5);
  const std::vector<float> zf = random_floats(rng, B * K, -3, 3);
  std::vector<double> z = as_double(zf), probs(B * K);
  const std::vector<std::int32_t> labels = {3, 0, 2};
  auto ce = [&] {
    return scale * ref::cross_entropy_forward(probs.data(), z.data(), labels.data(), B, K);
  };
  ce();
  std::vector<double> dz(B * K, 0.0);
  ref::cross_entropy_backward(dz.data(), probs.data(), labels.data(), B, K, scale);
  EXPECT_TRUE(gradients_match(dz, numeric_gradient(z, ce)));
  std::vector<float> pf(B * K), dzf(B * K, 0.0f);
  cross_entropy_forward(pf.data(), zf.data(), labels.data(), B, K);
  cross_entropy_backward(dzf.data(), pf.data(), labels.data(), B, K, static_cast<float>(scale));
  EXPECT_TRUE(fast_matches_reference(dzf.data(), dz, 2));

  // Class weights and label smoothing (torch.nn.CrossEntropyLoss(weight, label_smoothing)).
  const std::vector<double> weights = {0.5, 2.0, 1.25, 0.8};
  for (const double* w : {static_cast<const double*>(nullptr), weights.data()}) {
    for (double eps : {0.0, 0.15}) {
      SCOPED_TRACE(::testing::Message() << "weighted=" << (w != nullptr) << " eps=" << eps);
      auto wce = [&] {
        return scale * ref::weighted_cross_entropy_forward(probs.data(), z.data(), labels.data(), B,
                                                           K, w, eps);
      };
      wce();
      std::vector<double> dzw(B * K, 0.0);
      ref::weighted_cross_entropy_backward(dzw.data(), probs.data(), labels.data(), B, K, w, eps,
                                           scale);
      EXPECT_TRUE(gradients_match(dzw, numeric_gradient(z, wce)));
      std::vector<float> pwf(B * K), dzwf(B * K, 0.0f);
      weighted_cross_entropy_forward(pwf.data(), zf.data(), labels.data(), B, K, w, eps);
      weighted_cross_entropy_backward(dzwf.data(), pwf.data(), labels.data(), B, K, w, eps,
                                      static_cast<float>(scale));
      EXPECT_TRUE(fast_matches_reference(dzwf.data(), dzw, 2 * K));
    }
  }

  const std::vector<float> predf = random_floats(rng, B, -2, 2), tf = random_floats(rng, B, 0, 5);
  std::vector<double> pred = as_double(predf);
  const std::vector<double> target = as_double(tf);
  auto mse = [&] { return scale * ref::mse_forward(pred.data(), target.data(), B); };
  std::vector<double> dpred(B, 0.0);
  ref::mse_backward(dpred.data(), pred.data(), target.data(), B, scale);
  EXPECT_TRUE(gradients_match(dpred, numeric_gradient(pred, mse)));
  std::vector<float> dpf(B, 0.0f);
  mse_backward(dpf.data(), predf.data(), tf.data(), B, static_cast<float>(scale));
  EXPECT_TRUE(fast_matches_reference(dpf.data(), dpred, 2));

  // Multi-label: binary cross-entropy on logits against multi-hot rows.
  const std::vector<float> yf = {1, 0, 0, 1, 0, 0, 0, 0, 1, 1, 1, 0};
  const std::vector<double> y = as_double(yf);
  auto bce = [&] {
    return scale * ref::bce_with_logits_forward(probs.data(), z.data(), y.data(), B, K);
  };
  bce();
  std::vector<double> dzb(B * K, 0.0);
  ref::bce_with_logits_backward(dzb.data(), probs.data(), y.data(), B, K, scale);
  EXPECT_TRUE(gradients_match(dzb, numeric_gradient(z, bce)));
  std::vector<float> pbf(B * K), dzbf(B * K, 0.0f);
  bce_with_logits_forward(pbf.data(), zf.data(), yf.data(), B, K);
  bce_with_logits_backward(dzbf.data(), pbf.data(), yf.data(), B, K, static_cast<float>(scale));
  EXPECT_TRUE(fast_matches_reference(dzbf.data(), dzb, 2));
}

}  // namespace
}  // namespace bertfit
