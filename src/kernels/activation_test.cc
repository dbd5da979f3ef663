// Activations: fast float kernels against the double reference, element by element, with
// tolerances derived from the float operations each kernel performs.
#include "kernels/activation.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <numbers>
#include <utility>
#include <vector>

#include "kernels/cast.h"
#include "kernels/elementwise.h"
#include "kernels/ref/ref.h"
#include "kernels/test_util.h"

namespace bertfit {
namespace {

using testing::all_close;
using testing::FloatView;
using testing::kU;
using testing::Rng;

const std::int64_t kSizes[] = {1, 7, 63, 64, 65, 767, 768, 769, 33 * 768};
constexpr double kK0 = 0.79788456080286535588;  // √(2/π)
constexpr double kK1 = 0.044715;

const char* name(ActKind k) {
  switch (k) {
    case ActKind::kGelu:
      return "gelu";
    case ActKind::kGeluNew:
      return "gelu_new";
    case ActKind::kRelu:
      return "relu";
    case ActKind::kTanh:
      return "tanh";
  }
  return "?";
}

// First-order bound on the error of gelu_new's tanh(inner) in float: the inner polynomial
// takes ~6 roundings (constants included) scaled by sech²(inner), plus vtanh's own 1.3 ulp
// (<= 2.6u relative).
double gelu_new_tanh_error(double x) {
  const double inner = kK0 * (x + kK1 * x * x * x);
  const double sech2 = 1.0 - std::tanh(inner) * std::tanh(inner);
  return sech2 * kK0 * kU * (3 * std::fabs(x) + 6 * kK1 * std::fabs(x * x * x)) +
         3 * kU * std::fabs(std::tanh(inner));
}

// Forward tolerance for element with input x and reference output y (factor 2 over the
// first-order bound in each case).
double forward_tol(ActKind kind, double x, double y) {
  switch (kind) {
    case ActKind::kGelu:
      // verf <= 1.4 ulp (<= 1.4u absolute as |erf| < 1) plus 0.5u from rounding x/√2, and
      // 1 + erf one rounding (<= 2u): |δ(1+erf)| <= 3.9u <= 4.5u, times 0.5|x|, plus the final
      // product's u|y|.
      return 2 * (2.25 * kU * std::fabs(x) + kU * std::fabs(y));
    case ActKind::kGeluNew: {
      const double t = std::tanh(kK0 * (x + kK1 * x * x * x));
      return 2 * (0.5 * std::fabs(x) * (gelu_new_tanh_error(x) + kU * std::fabs(1 + t)) +
                  kU * std::fabs(y));
    }
    case ActKind::kRelu:
      return 0.0;  // exact
    case ActKind::kTanh:
      return 4 * kU * std::fabs(y);  // tanhf <= 2 ulp
  }
  return 0.0;
}

// Backward tolerance: |dout|·(error of the derivative) + the rounding of the final
// multiply-add into dx (u·|dx|), doubled.
double backward_tol(ActKind kind, double x, double y, double dout, double dx_ref) {
  double dd = 0.0;  // error of the float derivative
  switch (kind) {
    case ActKind::kGelu: {
      // cdf: 0.5·δ(1+erf) <= 2.25u; pdf = exp(-x²/2)/√(2π): vexp's 1.1 ulp (2.2u) plus the
      // argument's u·x²/2 and 2 more roundings: (4.2 + x²/2)u relative; the product with x
      // and the sum: 2 more roundings.
      const double pdf = std::exp(-0.5 * x * x) / std::sqrt(2 * std::numbers::pi);
      const double d = 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * pdf;
      dd = 2.25 * kU + std::fabs(x * pdf) * (5 + 0.5 * x * x) * kU + 2 * kU * std::fabs(d);
      break;
    }
    case ActKind::kGeluNew: {
      // d = 0.5(1+t) + 0.5x(1-t²)·k0(1+3k1x²): δ(1-t²) <= 2δt + 2u; ~6 more roundings.
      const double t = std::tanh(kK0 * (x + kK1 * x * x * x));
      const double dinner = kK0 * (1 + 3 * kK1 * x * x);
      const double dt = gelu_new_tanh_error(x);
      const double d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * dinner;
      dd = 0.5 * dt + 0.5 * std::fabs(x) * dinner * (2 * dt + 2 * kU + 6 * kU * (1 - t * t)) +
           2 * kU * std::fabs(d);
      break;
    }
    case ActKind::kRelu:
      dd = 0.0;
      break;
    case ActKind::kTanh:
      dd = kU * y * y + 2 * kU * std::fabs(1 - y * y);
      break;
  }
  return 2 * (std::fabs(dout) * dd + kU * std::fabs(dx_ref));
}

TEST(Activation, MatchesReference) {
  for (ActKind kind : {ActKind::kGelu, ActKind::kGeluNew, ActKind::kRelu, ActKind::kTanh}) {
    for (std::int64_t n : kSizes) {
      SCOPED_TRACE(::testing::Message() << name(kind) << " n=" << n);
      Rng rng(n * 31 + static_cast<int>(kind));
      FloatView x(n), y(n), dout(n), dx(n);
      x.fill_uniform(rng, -6, 6);
      dout.fill_uniform(rng, -1, 1);
      dx.fill_uniform(rng, -1, 1);
      activation_forward(kind, y.data(), x.data(), n);
      const std::vector<double> xd = x.to_double();
      std::vector<double> ry(n);
      ref::activation_forward(kind, ry.data(), xd.data(), n);
      EXPECT_TRUE(all_close(y.data(), ry.data(), n,
                            [&](std::int64_t i) { return forward_tol(kind, xd[i], ry[i]); }));

      // Backward from the same x and the kernel's own float y (what the model saves).
      const std::vector<double> yd = y.to_double(), gd = dout.to_double();
      std::vector<double> rdx = dx.to_double();
      ref::activation_backward(kind, rdx.data(), gd.data(), xd.data(), yd.data(), n);
      activation_backward(kind, dx.data(), dout.data(), x.data(), y.data(), n);
      EXPECT_TRUE(all_close(dx.data(), rdx.data(), n, [&](std::int64_t i) {
        return backward_tol(kind, xd[i], yd[i], gd[i], rdx[i]);
      }));
    }
  }
}

TEST(Activation, ReluAndTanhMayRunInPlace) {
  for (ActKind kind : {ActKind::kRelu, ActKind::kTanh}) {
    const std::int64_t n = 769;
    Rng rng(3);
    FloatView x(n), y(n);
    x.fill_uniform(rng, -3, 3);
    activation_forward(kind, y.data(), x.data(), n);
    activation_forward(kind, x.data(), x.data(), n);
    EXPECT_EQ(0, std::memcmp(x.data(), y.data(), sizeof(float) * n)) << name(kind);
  }
}

// The fused bf16 output is bit for bit the cast of the fp32 output (chunk edges included).
TEST(Activation, Bf16OutputIsTheCastOfTheFp32Output) {
  for (ActKind kind : {ActKind::kGelu, ActKind::kGeluNew, ActKind::kRelu, ActKind::kTanh}) {
    for (std::int64_t n :
         {std::int64_t{1}, std::int64_t{2047}, std::int64_t{2049}, std::int64_t{100003}}) {
      Rng rng(n + 7);
      FloatView x(n), y(n);
      x.fill_uniform(rng, -6, 6);
      activation_forward(kind, y.data(), x.data(), n);
      std::vector<std::uint16_t> want(n), got(n);
      cast_f32_to_bf16(want.data(), y.data(), n);
      activation_forward_bf16(kind, got.data(), x.data(), n);
      EXPECT_EQ(got, want) << name(kind) << " n=" << n;
    }
  }
}

// From a bf16 input: bit for bit the fp32 kernels on the exactly widened input.
TEST(Activation, Bf16InputIsTheFp32KernelOnTheWidenedInput) {
  for (ActKind kind : {ActKind::kGelu, ActKind::kGeluNew, ActKind::kRelu}) {
    // (rows, columns): columns past one L1 chunk (2048) and rows split between threads.
    for (auto [N, M] : {std::pair<std::int64_t, int>{1, 1}, {2, 2049}, {3, 4100}, {97, 1031}}) {
      const std::int64_t n = N * M;
      Rng rng(static_cast<std::uint64_t>(n + 11));
      FloatView x(n), dout(n), y(n), dx(n), db_want(M), db_got(M);
      x.fill_uniform(rng, -6, 6);
      dout.fill_uniform(rng, -1, 1);
      db_want.fill_uniform(rng, -1, 1);
      std::vector<std::uint16_t> xb(n), want(n), got(n);
      cast_f32_to_bf16(xb.data(), x.data(), n);
      for (std::int64_t i = 0; i < n; ++i) {
        x[i] = std::bit_cast<float>(static_cast<std::uint32_t>(xb[i]) << 16);
      }
      activation_forward(kind, y.data(), x.data(), n);
      cast_f32_to_bf16(want.data(), y.data(), n);
      activation_forward_bf16(kind, got.data(), xb.data(), n);
      EXPECT_EQ(got, want) << name(kind) << " n=" << n;
      // Training's forward keeps act'(x) in x's place: the fp32 backward's value with dout = 1
      // (into zeros), rounded once; the output as activation_forward_bf16's.
      for (std::int64_t i = 0; i < n; ++i) dx[i] = 0.0f;
      FloatView ones(n);
      ones.fill(1.0f);
      activation_backward(kind, dx.data(), ones.data(), x.data(), y.data(), n);
      std::vector<std::uint16_t> d_want(n), d_got = xb, z_got(n);
      cast_f32_to_bf16(d_want.data(), dx.data(), n);
      activation_forward_bf16_keep_derivative(kind, z_got.data(), d_got.data(), n);
      EXPECT_EQ(z_got, want) << name(kind) << " n=" << n;
      EXPECT_EQ(d_got, d_want) << name(kind) << " n=" << n;
      // Its backward with the bias gradient and the cast: the exact fp32 products dout·d, then
      // bias_backward and cast_f32_to_bf16 on them.
      std::vector<std::uint16_t> doutb(n);
      cast_f32_to_bf16(doutb.data(), dout.data(), n);
      for (std::int64_t i = 0; i < n; ++i) dx[i] = bf16_to_f32(doutb[i]) * bf16_to_f32(d_got[i]);
      for (int c = 0; c < M; ++c) db_got[c] = db_want[c];
      bias_backward(db_want.data(), dx.data(), N, M);
      cast_f32_to_bf16(want.data(), dx.data(), n);
      derivative_bias_backward_bf16(db_got.data(), got.data(), doutb.data(), d_got.data(), N, M);
      EXPECT_EQ(got, want) << name(kind) << " N=" << N << " M=" << M;
      EXPECT_EQ(0, std::memcmp(db_got.data(), db_want.data(), sizeof(float) * M))
          << name(kind) << " N=" << N << " M=" << M;
      // In place over dout, as the layer may run it.
      derivative_bias_backward_bf16(db_got.data(), doutb.data(), doutb.data(), d_got.data(), N, M);
      EXPECT_EQ(doutb, want) << name(kind) << " N=" << N << " M=" << M;
    }
  }
}

TEST(Activation, GeluMatchesKnownValues) {
  // gelu(1) = Φ(1) = 0.8413447460685429; gelu(-1) = -(1 - Φ(1)); gelu_new(1) from the
  // tanh formula = 0.8411919906082768.
  FloatView x(2), y(2);
  x[0] = 1.0f;
  x[1] = -1.0f;
  activation_forward(ActKind::kGelu, y.data(), x.data(), 2);
  EXPECT_NEAR(y[0], 0.8413447460685429, 4 * kU);
  EXPECT_NEAR(y[1], -0.15865525393145707, 4 * kU);
  activation_forward(ActKind::kGeluNew, y.data(), x.data(), 1);
  EXPECT_NEAR(y[0], 0.8411919906082768, 4 * kU);
}

}  // namespace
}  // namespace bertfit
