// Cross-entropy and MSE against the double reference, including extreme logits and the CHECK
// on labels out of range.
#include "kernels/loss.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/ref/ref.h"
#include "kernels/test_util.h"

namespace bertfit {
namespace {

using testing::all_close;
using testing::FloatView;
using testing::kU;
using testing::Rng;

// Both sides evaluate the same double formulas on the same inputs, in a possibly different
// order: a length-K double reduction differs by <= K·2^-53 relative; 1e-12 covers K <= 100s.
constexpr double kDoubleTol = 1e-12;

TEST(CrossEntropy, MatchesReference) {
  for (int B : {1, 3, 17}) {
    for (int K : {1, 2, 3, 7, 65}) {
      SCOPED_TRACE(::testing::Message() << "B=" << B << " K=" << K);
      Rng rng(B * 100 + K);
      FloatView logits(B * K), probs(B * K), dlogits(B * K);
      logits.fill_uniform(rng, -5, 5);
      if (K > 1) {
        logits[0] = 80.0f;  // exp would overflow in float without the max subtraction
        logits[1] = -80.0f;
      }
      std::vector<std::int32_t> labels(B);
      for (int b = 0; b < B; ++b) labels[b] = rng.below(K);
      const double loss = cross_entropy_forward(probs.data(), logits.data(), labels.data(), B, K);
      std::vector<double> rprobs(B * K);
      const double rloss =
          ref::cross_entropy_forward(rprobs.data(), logits.to_double().data(), labels.data(), B, K);
      EXPECT_NEAR(loss, rloss, kDoubleTol * (1 + std::fabs(rloss)));
      // probs are double values (equal up to kDoubleTol relative) rounded once to float; below
      // float's range the rounding error is absolute, <= 2^-150 (half the least subnormal).
      EXPECT_TRUE(all_close(probs.data(), rprobs.data(), B * K, [&](std::int64_t i) {
        return (kU + kDoubleTol) * rprobs[i] + 0x1p-150;
      }));
      // Backward from the same float probs on both sides: scale·(p - onehot)/B in double,
      // rounded once to float, then added once to the initial gradient.
      dlogits.fill_uniform(rng, -1, 1);
      const float scale = 0.5f;
      std::vector<double> rd = dlogits.to_double();
      const std::vector<double> d0 = rd;
      ref::cross_entropy_backward(rd.data(), probs.to_double().data(), labels.data(), B, K, scale);
      cross_entropy_backward(dlogits.data(), probs.data(), labels.data(), B, K, scale);
      EXPECT_TRUE(all_close(dlogits.data(), rd.data(), B * K, [&](std::int64_t i) {
        return kU * (std::fabs(rd[i] - d0[i]) + std::fabs(rd[i]));
      }));
    }
  }
}

TEST(CrossEntropy, KnownValue) {
  // Two classes with logits (0, ln 3): p = (1/4, 3/4); label 0 → loss ln 4.
  FloatView logits(2), probs(2);
  logits[0] = 0.0f;
  logits[1] = static_cast<float>(std::log(3.0));
  const std::int32_t label = 0;
  const double loss = cross_entropy_forward(probs.data(), logits.data(), &label, 1, 2);
  EXPECT_NEAR(loss, std::log(4.0), 4 * kU);  // ln 3 rounded to float moves it by <= u·ln 3
  EXPECT_NEAR(probs[0], 0.25, 4 * kU);
}

TEST(CrossEntropyDeathTest, LabelOutOfRangeIsAProgrammingError) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  FloatView logits(4), probs(4);
  logits.fill(0.0f);
  const std::int32_t labels[2] = {0, 2};
  EXPECT_DEATH(cross_entropy_forward(probs.data(), logits.data(), labels, 2, 2), "out of range");
}

TEST(WeightedCrossEntropy, MatchesReference) {
  for (int B : {1, 3, 17}) {
    for (int K : {1, 2, 3, 7, 65}) {
      for (double eps : {0.0, 0.1, 1.0}) {
        for (bool weighted : {false, true}) {
          SCOPED_TRACE(::testing::Message()
                       << "B=" << B << " K=" << K << " eps=" << eps << " weighted=" << weighted);
          Rng rng(B * 100 + K);
          FloatView logits(B * K), probs(B * K), dlogits(B * K);
          logits.fill_uniform(rng, -5, 5);
          if (K > 1) {
            logits[0] = 80.0f;
            logits[1] = -80.0f;
          }
          std::vector<std::int32_t> labels(B);
          for (int b = 0; b < B; ++b) labels[b] = rng.below(K);
          std::vector<double> weights(K);
          for (double& w : weights) w = rng.uniform(0.1, 3.0);
          const double* w = weighted ? weights.data() : nullptr;
          const double loss = weighted_cross_entropy_forward(probs.data(), logits.data(),
                                                             labels.data(), B, K, w, eps);
          std::vector<double> rprobs(B * K);
          const double rloss = ref::weighted_cross_entropy_forward(
              rprobs.data(), logits.to_double().data(), labels.data(), B, K, w, eps);
          // Both double, the terms summed in another order: as cross-entropy's kDoubleTol.
          EXPECT_NEAR(loss, rloss, kDoubleTol * (1 + std::fabs(rloss)));
          EXPECT_TRUE(all_close(probs.data(), rprobs.data(), B * K, [&](std::int64_t i) {
            return (kU + kDoubleTol) * rprobs[i] + 0x1p-150;
          }));
          // Backward from the same float probs: a double formula (with the K-term smoothing
          // sum, whose cancellation against w[k] stays within kDoubleTol of the terms'
          // magnitude) rounded once to float, then one float add.
          dlogits.fill_uniform(rng, -1, 1);
          std::vector<double> rd = dlogits.to_double();
          const std::vector<double> d0 = rd;
          ref::weighted_cross_entropy_backward(rd.data(), probs.to_double().data(), labels.data(),
                                               B, K, w, eps, 0.5);
          weighted_cross_entropy_backward(dlogits.data(), probs.data(), labels.data(), B, K, w, eps,
                                          0.5f);
          EXPECT_TRUE(all_close(dlogits.data(), rd.data(), B * K, [&](std::int64_t i) {
            return kU * (std::fabs(rd[i] - d0[i]) + std::fabs(rd[i])) + kDoubleTol;
          }));
        }
      }
    }
  }
}

TEST(WeightedCrossEntropy, PlainCaseIsCrossEntropyAndWeightsMakeAWeightedMean) {
  const int B = 4, K = 3;
  Rng rng(11);
  FloatView logits(B * K), p1(B * K), p2(B * K);
  logits.fill_uniform(rng, -3, 3);
  const std::int32_t labels[B] = {0, 2, 2, 1};
  const double plain = cross_entropy_forward(p1.data(), logits.data(), labels, B, K);
  EXPECT_NEAR(weighted_cross_entropy_forward(p2.data(), logits.data(), labels, B, K, nullptr, 0),
              plain, kDoubleTol * plain);
  // Weights (1, 1, 3) with eps 0: rows 1 and 2 count three times, the mean is over 8 weights.
  std::vector<double> nll(B);
  for (int b = 0; b < B; ++b)
    nll[b] = cross_entropy_forward(p1.data(), logits.data() + b * K, &labels[b], 1, K);
  const double w[K] = {1, 1, 3};
  const double want = (nll[0] + 3 * nll[1] + 3 * nll[2] + nll[3]) / 8;
  EXPECT_NEAR(weighted_cross_entropy_forward(p2.data(), logits.data(), labels, B, K, w, 0), want,
              kDoubleTol * want);
}

TEST(Mse, MatchesReference) {
  for (int B : {1, 3, 17}) {
    Rng rng(B);
    FloatView pred(B), target(B), dpred(B);
    pred.fill_uniform(rng, -2, 2);
    target.fill_uniform(rng, 0, 5);
    dpred.fill_uniform(rng, -1, 1);
    const std::vector<double> pd = pred.to_double(), td = target.to_double();
    const double rloss = ref::mse_forward(pd.data(), td.data(), B);
    EXPECT_NEAR(mse_forward(pred.data(), target.data(), B), rloss, kDoubleTol * rloss);
    std::vector<double> rd = dpred.to_double();
    const std::vector<double> d0 = rd;
    ref::mse_backward(rd.data(), pd.data(), td.data(), B, 0.25);
    mse_backward(dpred.data(), pred.data(), target.data(), B, 0.25f);
    // Double formula rounded once, then one float add.
    EXPECT_TRUE(all_close(dpred.data(), rd.data(), B, [&](std::int64_t i) {
      return kU * (std::fabs(rd[i] - d0[i]) + std::fabs(rd[i]));
    }));
  }
}

TEST(Mse, KnownValue) {
  const float pred[2] = {1.0f, 3.0f}, target[2] = {0.0f, 1.0f};
  EXPECT_EQ(mse_forward(pred, target, 2), 2.5);  // (1 + 4) / 2
  float d[2] = {0.0f, 0.0f};
  mse_backward(d, pred, target, 2, 1.0f);
  EXPECT_EQ(d[0], 1.0f);  // 2·1/2
  EXPECT_EQ(d[1], 2.0f);  // 2·2/2
}

TEST(BceWithLogits, MatchesReference) {
  for (int B : {1, 3, 9}) {
    for (int K : {1, 2, 5}) {
      Rng rng(B * 10 + K);
      const int n = B * K;
      FloatView logits(n), targets(n), probs(n), dlogits(n);
      logits.fill_uniform(rng, -4, 4);
      for (int i = 0; i < n; ++i) targets.data()[i] = (i * 7 + B) % 3 == 0 ? 1.0f : 0.0f;
      dlogits.fill_uniform(rng, -1, 1);
      std::vector<double> rprobs(n);
      const double rloss = ref::bce_with_logits_forward(rprobs.data(), logits.to_double().data(),
                                                        targets.to_double().data(), B, K);
      const double loss =
          bce_with_logits_forward(probs.data(), logits.data(), targets.data(), B, K);
      // Both in double from the same float inputs; the formulas differ in rounding only.
      EXPECT_NEAR(loss, rloss, 1e-12 * (1 + rloss));
      EXPECT_TRUE(all_close(probs.data(), rprobs.data(), n,
                            [&](std::int64_t i) { return kU * rprobs[i]; }));
      std::vector<double> rd = dlogits.to_double();
      const std::vector<double> d0 = rd;
      ref::bce_with_logits_backward(rd.data(), probs.to_double().data(), targets.to_double().data(),
                                    B, K, 0.5);
      bce_with_logits_backward(dlogits.data(), probs.data(), targets.data(), B, K, 0.5f);
      // The double formula rounded once, then one float add.
      EXPECT_TRUE(all_close(dlogits.data(), rd.data(), n, [&](std::int64_t i) {
        return kU * (std::fabs(rd[i] - d0[i]) + std::fabs(rd[i]));
      }));
    }
  }
}

TEST(BceWithLogits, KnownValueAndLargeLogitsStayFinite) {
  // z = 0: loss log 2 whatever the target; gradient (0.5 - y) / n.
  const float z0[2] = {0.0f, 0.0f}, y0[2] = {1.0f, 0.0f};
  float p[2], d[2] = {0.0f, 0.0f};
  EXPECT_NEAR(bce_with_logits_forward(p, z0, y0, 1, 2), std::log(2.0), 1e-15);
  bce_with_logits_backward(d, p, y0, 1, 2, 1.0f);
  EXPECT_EQ(d[0], -0.25f);
  EXPECT_EQ(d[1], 0.25f);
  // |z| = 200: exp(200) overflows float; the loss is 200 for the wrong target, 0 for the right.
  const float zb[2] = {200.0f, -200.0f}, yb[2] = {0.0f, 0.0f};
  EXPECT_NEAR(bce_with_logits_forward(p, zb, yb, 1, 2), 100.0, 1e-9);
  EXPECT_EQ(p[0], 1.0f);
  EXPECT_EQ(p[1], 0.0f);
}

}  // namespace
}  // namespace bertfit
