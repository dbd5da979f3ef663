// AdamW: a hand-computed step, several steps against the double reference, and bit-exactness
// (with and without a clipping coefficient) against a line-by-line transcription of torch
// 1.13's _single_tensor_adamw in float. Also sum_squares.
#include "kernels/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
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

TEST(AdamW, HandComputedFirstStep) {
  // Step 1 from m = v = 0: m = (1-b1)g, v = (1-b2)g², bias corrections 1-b1 and 1-b2, so
  // m̂ = g, v̂ = g² and the update is lr·g/(|g| + eps). With p = 1, g = 0.5, lr = 0.1, wd = 0.1:
  // decay gives 0.99, the update 0.1·0.5/(0.5 + 1e-8) = 0.1 - 2e-9: p = 0.890000002.
  AdamWParams h{.lr = 0.1, .weight_decay = 0.1};
  float p = 1.0f, g = 0.5f, m = 0.0f, v = 0.0f;
  adamw_update(&p, &g, &m, &v, 1, h, true);
  EXPECT_NEAR(p, 0.890000002, 4 * kU);  // a handful of float roundings near 1
  EXPECT_NEAR(m, 0.05, 2 * kU * 0.05);
  EXPECT_NEAR(v, 0.00025, 4 * kU * 0.00025);
  // Without decay: 1 - 0.1·0.5/(0.5 + 1e-8) = 0.900000002.
  float q = 1.0f, m2 = 0.0f, v2 = 0.0f;
  adamw_update(&q, &g, &m2, &v2, 1, h, false);
  EXPECT_NEAR(q, 0.900000002, 4 * kU);
}

// One element of torch 1.13 _single_tensor_adamw, transcribed line by line with its roundings:
// Python scalars are doubles, rounded to float where they meet a float tensor.
void torch_adamw(float& p, float g, float& m, float& v, const AdamWParams& h, bool decay) {
  const double wd = decay ? h.weight_decay : 0.0;
  p = p * static_cast<float>(1 - h.lr * wd);            // param.mul_(1 - lr*wd)
  m = m * static_cast<float>(h.beta1);                  // exp_avg.mul_(beta1)
  m = std::fma(g, static_cast<float>(1 - h.beta1), m);  //   .add_(grad, alpha=1-b1)
  v = v * static_cast<float>(h.beta2);                  // exp_avg_sq.mul_(beta2)
  v = v + static_cast<float>(1 - h.beta2) * g * g;      //   .addcmul_(g, g, 1-b2)
  const double bc1 = 1 - std::pow(h.beta1, static_cast<double>(h.step));
  const double bc2 = 1 - std::pow(h.beta2, static_cast<double>(h.step));
  const double step_size = h.lr / bc1;
  float denom = std::sqrt(v) / static_cast<float>(std::sqrt(bc2));  // exp_avg_sq.sqrt() / ..
  denom = denom + static_cast<float>(h.eps);                        //   .add_(eps)
  p = p + static_cast<float>(-step_size) * m / denom;  // addcdiv_(m, denom, value=-step_size)
}

TEST(AdamW, BitExactWithTorchOperationOrder) {
  const std::int64_t n = 1000;
  Rng rng(1);
  FloatView p(n), g(n), m(n), v(n);
  p.fill_uniform(rng, -1, 1);
  std::vector<float> tp(p.data(), p.data() + n), tm(n, 0.0f), tv(n, 0.0f);
  for (std::int64_t step = 1; step <= 6; ++step) {
    g.fill_uniform(rng, -1, 1);
    // Every third step clipped: torch multiplies the gradients by the float coefficient first.
    const float clip = step % 3 == 0 ? 0.37f : 1.0f;
    const AdamWParams h{.lr = 1e-3 * step, .weight_decay = 0.01, .step = step, .grad_scale = clip};
    const bool decay = step % 2 == 0;
    adamw_update(p.data(), g.data(), m.data(), v.data(), n, h, decay);
    for (std::int64_t i = 0; i < n; ++i) torch_adamw(tp[i], g[i] * clip, tm[i], tv[i], h, decay);
    for (std::int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(p[i], tp[i]) << "step " << step << " element " << i;
      ASSERT_EQ(m[i], tm[i]) << "step " << step << " element " << i;
      ASSERT_EQ(v[i], tv[i]) << "step " << step << " element " << i;
    }
  }
  // Why the hyperparameters are double: torch's float(1 - 0.9) differs from 1 - 0.9f.
  EXPECT_NE(static_cast<float>(1 - 0.9), 1.0f - 0.9f);
}

TEST(AdamW, SeveralStepsMatchDoubleReference) {
  constexpr int kSteps = 5;
  for (std::int64_t n : {1, 7, 769, 33 * 768}) {
    for (bool decay : {false, true}) {
      for (double lr : {1e-3, 0.1}) {
        SCOPED_TRACE(::testing::Message() << "n=" << n << " decay=" << decay << " lr=" << lr);
        Rng rng(n + (decay ? 1 : 0));
        FloatView p(n), g(n), m(n), v(n);
        p.fill_uniform(rng, -1, 1);
        std::vector<double> rp = p.to_double(), rm(n, 0.0), rv(n, 0.0);
        for (int step = 1; step <= kSteps; ++step) {
          // |g| in [0.1, 1] with random sign: v̂ >= 0.01, so |m̂|/sqrt(v̂) <= 10.
          for (std::int64_t i = 0; i < n; ++i) {
            const double mag = rng.uniform(0.1, 1.0);
            g[i] = static_cast<float>(rng.uniform(0, 1) < 0.5 ? -mag : mag);
          }
          const AdamWParams h{.lr = lr, .weight_decay = 0.01, .step = step};
          adamw_update(p.data(), g.data(), m.data(), v.data(), n, h, decay);
          ref::adamw_update(rp.data(), g.to_double().data(), rm.data(), rv.data(), n, h, decay);
        }
        // m_t = Σ_s (1-β1)β1^(t-s) g_s. Step s adds <= 4 roundings (the float constants β1,
        // 1-β1 and two operations) of size <= |m_s| <= bc1_s·G (G = max|g| = 1), and later steps
        // damp it by β1^(t-s), with β1^(t-s)·bc1_s <= bc1_t: |δm| <= 4uS·bc1, i.e. |δm̂| <= 4uS.
        // v is a sum of positive terms: relative error <= 4uS. The update lr·m̂/(sqrt(v̂)+eps),
        // with sqrt(v̂) >= 0.1 and |m̂|/sqrt(v̂) <= 10, then errs by
        // <= lr·(δm̂/0.1 + 10·(δv̂/(2v̂) + 5u)) <= lr·u·(60S + 50) per step; p also takes 2
        // roundings of size |p| + 10·lr per step. Factor 2 for second order.
        const double S = kSteps;
        EXPECT_TRUE(all_close(m.data(), rm.data(), n, 2 * 4 * kU * S));
        EXPECT_TRUE(all_close(v.data(), rv.data(), n,
                              [&](std::int64_t i) { return 2 * 4 * kU * S * rv[i]; }));
        EXPECT_TRUE(all_close(p.data(), rp.data(), n, [&](std::int64_t i) {
          return 2 * (S * 2 * kU * (std::fabs(rp[i]) + 10 * lr) + lr * kU * (60 * S + 50) * S);
        }));
      }
    }
  }
}

TEST(SumSquares, MatchesReferenceAndIgnoresThreadCount) {
  for (std::int64_t n : {0, 1, 7, 769, 200001}) {
    Rng rng(n);
    FloatView x(std::max<std::int64_t>(n, 1));
    x.fill_uniform(rng, -1, 1);
    const double want = ref::sum_squares(x.to_double().data(), n);
    const int saved = num_threads();
    set_num_threads(1);
    const double one = sum_squares(x.data(), n);
    set_num_threads(3);
    const double three = sum_squares(x.data(), n);
    set_num_threads(saved);
    EXPECT_EQ(one, three) << "n=" << n;
    // Squares of floats are exact in double; a length-n double sum of positive terms errs by
    // <= n·2^-53 relative.
    EXPECT_NEAR(one, want, n * 0x1p-53 * want) << "n=" << n;
  }
}

}  // namespace
}  // namespace bertfit
