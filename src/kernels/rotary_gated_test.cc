// ModernBERT's pointwise kernels: rotary positions (kernels/rotary.h) and the gated activation
// (kernels/activation.h) against their double references, the references' backwards against
// finite differences, and the fast backwards against the references'.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "base/dtype.h"
#include "kernels/activation.h"
#include "kernels/dropout.h"
#include "kernels/gradcheck_util.h"
#include "kernels/ref/ref.h"
#include "kernels/rotary.h"
#include "kernels/test_util.h"

namespace bertfit {
namespace {

using testing::all_close;
using testing::FloatView;
using testing::kU;
using testing::Rng;

struct RotaryCase {
  int B, T, C, H;
  double theta;
};
const RotaryCase kRotaryCases[] = {{1, 1, 8, 1, 10000.0},
                                   {2, 7, 12, 3, 160000.0},
                                   {3, 40, 32, 4, 10000.0},
                                   {1, 130, 64, 1, 160000.0},
                                   {2, 33, 128, 2, 10000.0}};

// The fp32 kernel rounds each frequency and each angle pos·f to fp32 (as torch does), so its
// angles differ from the exact ones by up to ~pos·f·2u; a rotated value then errs by that
// angle times its inputs' size, plus a few roundings of the products.
double rotary_tol(const std::vector<double>& x, std::int64_t i, int T, int C, int D) {
  const std::int64_t row = i / (3 * C), ch = i % (3 * C);
  if (ch >= 2 * C) return 0.0;  // v: untouched, exactly
  const int half = D / 2;
  const std::int64_t base = row * 3 * C + ch - ch % D;
  const int k = static_cast<int>(ch % D) % half;
  const double size = std::fabs(x[base + k]) + std::fabs(x[base + k + half]);
  const double pos = static_cast<double>(row % T);
  return size * (8 * kU + 4 * kU * pos) + 1e-30;
}

TEST(Rotary, ForwardMatchesReference) {
  Rng rng(7);
  for (const RotaryCase& c : kRotaryCases) {
    SCOPED_TRACE(::testing::Message() << "B " << c.B << " T " << c.T << " C " << c.C << " H " << c.H
                                      << " theta " << c.theta);
    const std::int64_t R = std::int64_t{c.B} * c.T, n = R * 3 * c.C;
    FloatView x(n);
    x.fill_uniform(rng, -2, 2);
    std::vector<double> want = x.to_double();
    const std::vector<double> in = want;
    ref::rotary_forward(want.data(), c.theta, R, c.T, c.C, c.H);
    const RotaryTable t = rotary_table(c.theta, c.C / c.H, c.T);
    rotary_forward(x.data(), t, R, c.C, c.H);
    EXPECT_TRUE(all_close(x.data(), want.data(), n,
                          [&](std::int64_t i) { return rotary_tol(in, i, c.T, c.C, c.C / c.H); }));
    // A table made for a longer T serves this one (rows index positions r % T).
    FloatView y(n);
    for (std::int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(in[i]);
    RotaryTable longer = rotary_table(c.theta, c.C / c.H, 2 * c.T + 3);
    longer.T = c.T;  // the caller's T: the first T rows of the table are the same positions
    rotary_forward(y.data(), longer, R, c.C, c.H);
    for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(x[i], y[i]) << i;
  }
}

TEST(Rotary, Bf16MatchesReferenceWithinRounding) {
  Rng rng(8);
  for (const RotaryCase& c : kRotaryCases) {
    const std::int64_t R = std::int64_t{c.B} * c.T, n = R * 3 * c.C;
    std::vector<std::uint16_t> x(n);
    std::vector<double> want(n);
    for (std::int64_t i = 0; i < n; ++i) {
      x[i] = f32_to_bf16(static_cast<float>(rng.uniform(-2, 2)));
      want[i] = bf16_to_f32(x[i]);
    }
    const std::vector<double> in = want;
    ref::rotary_forward(want.data(), c.theta, R, c.T, c.C, c.H);
    rotary_forward(x.data(), rotary_table(c.theta, c.C / c.H, c.T), R, c.C, c.H);
    std::vector<float> got(n);
    for (std::int64_t i = 0; i < n; ++i) got[i] = bf16_to_f32(x[i]);
    // One rounding to bf16 (2^-9 relative of the result, at most half the pair's size) over
    // the fp32 tolerance.
    EXPECT_TRUE(all_close(got.data(), want.data(), n, [&](std::int64_t i) {
      const double t = rotary_tol(in, i, c.T, c.C, c.C / c.H);
      return t == 0.0 ? 0.0 : t + std::fabs(want[i]) / 256 + 1e-30;
    }));
  }
}

// The reference backward is the derivative of the reference forward (finite differences of
// Σ w · rot(x)), and the fast backward equals the reference's within fp32 rounding.
TEST(Rotary, BackwardIsTheInverseRotation) {
  Rng rng(9);
  const RotaryCase c{2, 5, 8, 2, 10000.0};
  const std::int64_t R = std::int64_t{c.B} * c.T, n = R * 3 * c.C;
  std::vector<double> x(n), w(n);
  for (auto& v : x) v = rng.uniform(-1, 1);
  for (auto& v : w) v = rng.uniform(-1, 1);
  auto loss = [&] {
    std::vector<double> y = x;
    ref::rotary_forward(y.data(), c.theta, R, c.T, c.C, c.H);
    return testing::weighted_sum(w, y);
  };
  const std::vector<double> numeric = testing::numeric_gradient(x, loss);
  std::vector<double> analytic = w;
  ref::rotary_backward(analytic.data(), c.theta, R, c.T, c.C, c.H);
  for (std::int64_t i = 0; i < n; ++i) EXPECT_NEAR(analytic[i], numeric[i], testing::kFdTol) << i;

  FloatView g(n);
  for (std::int64_t i = 0; i < n; ++i) g[i] = static_cast<float>(w[i]);
  rotary_backward(g.data(), rotary_table(c.theta, c.C / c.H, c.T), R, c.C, c.H);
  EXPECT_TRUE(all_close(g.data(), analytic.data(), n,
                        [&](std::int64_t i) { return rotary_tol(w, i, c.T, c.C, c.C / c.H); }));
}

struct GatedCase {
  std::int64_t M, I;
  float p;
};
const GatedCase kGatedCases[] = {
    {1, 1, 0.0f}, {3, 7, 0.0f}, {5, 48, 0.0f}, {4, 2049, 0.0f}, {6, 33, 0.3f}};
const ActKind kKinds[] = {ActKind::kGelu, ActKind::kGeluNew, ActKind::kRelu};

TEST(GatedActivation, ForwardAndBackwardMatchReference) {
  Rng rng(11);
  for (ActKind kind : kKinds) {
    for (const GatedCase& c : kGatedCases) {
      SCOPED_TRACE(::testing::Message() << "kind " << static_cast<int>(kind) << " M " << c.M
                                        << " I " << c.I << " p " << c.p);
      const std::uint64_t key = dropout_key(1, 2, 3, 4, 5);
      FloatView x(c.M * 2 * c.I), dout(c.M * c.I), out(c.M * c.I), dx(c.M * 2 * c.I);
      x.fill_uniform(rng, -3, 3);
      dout.fill_uniform(rng, -1, 1);
      const std::vector<double> xd = x.to_double(), dd = dout.to_double();
      std::vector<double> want(c.M * c.I), want_dx(c.M * 2 * c.I);
      ref::gated_activation_forward(kind, want.data(), xd.data(), c.M, c.I, c.p, key);
      ref::gated_activation_backward(kind, want_dx.data(), dd.data(), xd.data(), c.M, c.I, c.p,
                                     key);
      gated_activation_forward(kind, out.data(), x.data(), c.M, c.I, c.p, key);
      gated_activation_backward(kind, dx.data(), dout.data(), x.data(), c.M, c.I, c.p, key);
      // act(x) within a few ulp of its value (activation_test.cc bounds each kind), times the
      // gate, and the dropout's scale: 16u of the result's inputs' size.
      EXPECT_TRUE(all_close(out.data(), want.data(), c.M * c.I, [&](std::int64_t i) {
        const std::int64_t r = i / c.I, k = i % c.I;
        return 16 * kU * std::fabs(xd[r * 2 * c.I + c.I + k]) *
                   (std::fabs(xd[r * 2 * c.I + k]) + 1) / (1.0 - c.p) +
               1e-30;
      }));
      EXPECT_TRUE(all_close(dx.data(), want_dx.data(), c.M * 2 * c.I, [&](std::int64_t i) {
        const std::int64_t r = i / (2 * c.I), k = i % c.I;
        const double g = std::fabs(dd[r * c.I + k]) / (1.0 - c.p);
        return 32 * kU * g * (std::fabs(xd[r * 2 * c.I + c.I + k]) + 1) *
                   (std::fabs(xd[r * 2 * c.I + k]) + 1) +
               1e-30;
      }));
      if (c.p > 0) {  // the dropout drops exactly where dropout_keep says
        std::int64_t dropped = 0;
        for (std::int64_t i = 0; i < c.M * c.I; ++i) {
          if (dropout_keep(key, static_cast<std::uint64_t>(i), c.p)) continue;
          ++dropped;
          ASSERT_EQ(out[i], 0.0f) << i;
          ASSERT_EQ(dx[(i / c.I) * 2 * c.I + i % c.I], 0.0f) << i;
        }
        EXPECT_GT(dropped, 0);
      }
    }
  }
}

TEST(GatedActivation, ReferenceBackwardIsTheDerivative) {
  Rng rng(12);
  for (ActKind kind : {ActKind::kGelu, ActKind::kGeluNew}) {
    const std::int64_t M = 3, I = 5;
    const float p = 0.25f;
    const std::uint64_t key = dropout_key(9, 8, 7, 6, 5);
    std::vector<double> x(M * 2 * I), w(M * I), y(M * I), dx(M * 2 * I);
    for (auto& v : x) v = rng.uniform(-2, 2);
    for (auto& v : w) v = rng.uniform(-1, 1);
    auto loss = [&] {
      ref::gated_activation_forward(kind, y.data(), x.data(), M, I, p, key);
      return testing::weighted_sum(w, y);
    };
    const std::vector<double> numeric = testing::numeric_gradient(x, loss);
    ref::gated_activation_backward(kind, dx.data(), w.data(), x.data(), M, I, p, key);
    for (std::size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(dx[i], numeric[i], testing::kFdTol) << i;
  }
}

TEST(GatedActivation, Bf16WithinRoundingOfReference) {
  Rng rng(13);
  const std::int64_t M = 7, I = 300;
  for (float p : {0.0f, 0.2f}) {
    const std::uint64_t key = dropout_key(1, 1, 1, 1, 1);
    std::vector<std::uint16_t> x(M * 2 * I), dout(M * I), out(M * I), dx(M * 2 * I);
    std::vector<double> xd(x.size()), dd(dout.size()), want(M * I), want_dx(M * 2 * I);
    for (std::size_t i = 0; i < x.size(); ++i) {
      x[i] = f32_to_bf16(static_cast<float>(rng.uniform(-3, 3)));
      xd[i] = bf16_to_f32(x[i]);
    }
    for (std::size_t i = 0; i < dout.size(); ++i) {
      dout[i] = f32_to_bf16(static_cast<float>(rng.uniform(-1, 1)));
      dd[i] = bf16_to_f32(dout[i]);
    }
    ref::gated_activation_forward(ActKind::kGelu, want.data(), xd.data(), M, I, p, key);
    ref::gated_activation_backward(ActKind::kGelu, want_dx.data(), dd.data(), xd.data(), M, I, p,
                                   key);
    gated_activation_forward_bf16(ActKind::kGelu, out.data(), x.data(), M, I, p, key);
    gated_activation_backward_bf16(ActKind::kGelu, dx.data(), dout.data(), x.data(), M, I, p, key);
    // One rounding to bf16 of the result (2^-9 relative) over the fp32 kernel's error.
    for (std::int64_t i = 0; i < M * I; ++i) {
      EXPECT_NEAR(bf16_to_f32(out[i]), want[i], std::fabs(want[i]) / 256 + 1e-6) << i;
    }
    for (std::int64_t i = 0; i < M * 2 * I; ++i) {
      EXPECT_NEAR(bf16_to_f32(dx[i]), want_dx[i], std::fabs(want_dx[i]) / 256 + 1e-6) << i;
    }
  }
}

}  // namespace
}  // namespace bertfit
