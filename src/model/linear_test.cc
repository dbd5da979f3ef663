// Linear, the one matrix-product op of the layer, in both precisions against a double-precision
// reference: forward y = x·wᵀ + b, backward dx (overwrite / accumulate), dw, db, and the fused
// backward through the activation. fp32 to float rounding; bf16 to the reference computed on
// the bf16-rounded operands (the op's exact contract), so a wrong rounding slot or operand fails.
#include "model/linear.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "base/aligned.h"
#include "base/dtype.h"
#include "kernels/activation.h"
#include "kernels/ref/ref.h"

namespace bertfit {
namespace {

constexpr std::int64_t M = 7, K = 24, N = 40;

std::vector<float> random(std::int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

std::vector<double> widen(const std::vector<float>& v, bool round_bf16) {
  std::vector<double> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i)
    out[i] = round_bf16 ? bf16_to_f32(f32_to_bf16(v[i])) : v[i];
  return out;
}

double max_rel(const float* got, const std::vector<double>& want) {
  double scale = 0, err = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::fabs(want[i]));
    err = std::max(err, std::fabs(got[i] - want[i]));
  }
  return err / scale;
}

struct Case {
  std::mt19937 rng{11};
  std::vector<float> x = random(M * K, rng), w = random(N * K, rng), b = random(N, rng),
                     dy = random(M * N, rng), dx0 = random(M * K, rng);
  PreparedWeightBf16 prepared;
  bool bf16;
  explicit Case(bool use_bf16) : bf16(use_bf16) {
    if (bf16) prepared.prepare(w.data(), N, K, /*with_backward=*/true);
  }
  Linear op() const { return Linear(w.data(), b.data(), bf16 ? &prepared : nullptr, N, K); }
  // The reference on the operands as the precision reads them.
  std::vector<double> xr() const { return widen(x, bf16); }
  std::vector<double> wr() const { return widen(w, bf16); }
  std::vector<double> dyr() const { return widen(dy, bf16); }
  double bound() const { return bf16 ? 1e-5 : 1e-6; }
};

void check_forward(bool bf16) {
  Case c(bf16);
  AlignedBuffer<float> y(M * N);
  AlignedBuffer<std::uint16_t> x_bf16(M * K);
  std::vector<float> x = c.x;
  c.op().forward(Rows{y.data()}, Rows{x.data(), bf16 ? x_bf16.data() : nullptr}, M);
  std::vector<double> want(M * N);
  const auto xr = c.xr(), wr = c.wr();
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t n = 0; n < N; ++n) {
      double s = c.b[n];
      for (std::int64_t k = 0; k < K; ++k) s += xr[m * K + k] * wr[n * K + k];
      want[m * N + n] = s;
    }
  EXPECT_LT(max_rel(y.data(), want), c.bound());
  if (bf16) {  // the rounded input is kept for the weight gradient
    for (std::int64_t i = 0; i < M * K; ++i) ASSERT_EQ(x_bf16[i], f32_to_bf16(c.x[i])) << i;
    // A bf16-only output is the fp32 sum rounded once.
    AlignedBuffer<std::uint16_t> y_bf16(M * N);
    c.op().forward(Rows{nullptr, y_bf16.data()}, Rows{nullptr, x_bf16.data()}, M);
    for (std::int64_t i = 0; i < M * N; ++i) ASSERT_EQ(y_bf16[i], f32_to_bf16(y[i])) << i;
  }
}

void check_backward(bool bf16, Output dx_out) {
  Case c(bf16);
  std::vector<float> dx = c.dx0, dw(N * K, 0.5f), db(N, 0.25f);
  AlignedBuffer<std::uint16_t> x_bf16(M * K), dy_bf16(M * N);
  for (std::int64_t i = 0; i < M * K; ++i) x_bf16[i] = f32_to_bf16(c.x[i]);
  std::vector<float> x = c.x;
  c.op().backward(dx.data(), dx_out, dw.data(), db.data(), c.dy.data(),
                  Rows{x.data(), bf16 ? x_bf16.data() : nullptr}, LinearScratch{dy_bf16.data()}, M);
  const auto xr = c.xr(), wr = c.wr(), dyr = c.dyr();
  std::vector<double> want_dx(M * K), want_dw(N * K, 0.5), want_db(N, 0.25);
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t k = 0; k < K; ++k) {
      double s = dx_out == Output::kAccumulate ? c.dx0[m * K + k] : 0.0;
      for (std::int64_t n = 0; n < N; ++n) s += dyr[m * N + n] * wr[n * K + k];
      want_dx[m * K + k] = s;
    }
  for (std::int64_t n = 0; n < N; ++n) {
    for (std::int64_t k = 0; k < K; ++k)
      for (std::int64_t m = 0; m < M; ++m) want_dw[n * K + k] += dyr[m * N + n] * xr[m * K + k];
    for (std::int64_t m = 0; m < M; ++m) want_db[n] += c.dy[m * N + n];  // the bias sees fp32 dy
  }
  EXPECT_LT(max_rel(dx.data(), want_dx), c.bound());
  EXPECT_LT(max_rel(dw.data(), want_dw), c.bound());
  EXPECT_LT(max_rel(db.data(), want_db), 1e-6);
  if (bf16 && dx_out == Output::kOverwrite) {
    // backward_products from the bf16 dy the bias pass wrote, dx in bf16 alone: the fp32 dx
    // rounded once; dw as before (accumulated once more).
    AlignedBuffer<std::uint16_t> dx_bf16(M * K);
    std::vector<float> dw2(N * K, 0.5f);
    c.op().backward_products(Rows{nullptr, dx_bf16.data()}, Output::kOverwrite, dw2.data(),
                             Rows{nullptr, dy_bf16.data()}, Rows{nullptr, x_bf16.data()}, M);
    for (std::int64_t i = 0; i < M * K; ++i) ASSERT_EQ(dx_bf16[i], f32_to_bf16(dx[i])) << i;
    EXPECT_EQ(dw2, dw);
  }
}

TEST(Linear, ForwardFp32) { check_forward(false); }
TEST(Linear, BackwardFp32) {
  check_backward(false, Output::kOverwrite);
  check_backward(false, Output::kAccumulate);
}
TEST(Linear, ForwardBf16) {
  if (!has_native_bf16()) GTEST_SKIP() << "no native bf16 on this CPU";
  check_forward(true);
}
TEST(Linear, BackwardBf16) {
  if (!has_native_bf16()) GTEST_SKIP() << "no native bf16 on this CPU";
  check_backward(true, Output::kOverwrite);
  check_backward(true, Output::kAccumulate);
}

// z = act(y), y = x·wᵀ + b: the fused backward equals the activation's reference backward
// followed by the product's. bf16: dz arrives in bf16 and the training forward
// (activation_forward_bf16_keep_derivative) leaves act'(y) rounded to bf16 in y's slot, so dy
// = dz·act'(y) carries that rounding (<= 2^-9 relative, 2^-8 with a rounding flip between the
// float and the double derivative) and is itself rounded to bf16 for the products.
void check_through_activation(bool bf16, ActKind kind) {
  Case c(bf16);
  std::vector<float> y = random(M * N, c.rng), z(M * N), dz = random(M * N, c.rng);
  std::vector<double> yd(y.begin(), y.end()), zd(M * N), dyd(M * N, 0.0);
  AlignedBuffer<std::uint16_t> y_bf16(M * N), z_bf16(M * N), x_bf16(M * K), dy_bf16(M * N),
      dz_bf16(M * N);
  for (std::int64_t i = 0; i < M * N; ++i) {
    if (bf16) yd[i] = bf16_to_f32(y_bf16[i] = f32_to_bf16(y[i]));
    if (bf16) dz[i] = bf16_to_f32(dz_bf16[i] = f32_to_bf16(dz[i]));
  }
  ref::activation_forward(kind, zd.data(), yd.data(), M * N);
  for (std::int64_t i = 0; i < M * N; ++i) z[i] = static_cast<float>(zd[i]);
  std::vector<double> dzd(dz.begin(), dz.end());
  ref::activation_backward(kind, dyd.data(), dzd.data(), yd.data(), zd.data(), M * N);
  for (std::int64_t i = 0; i < M * K; ++i) x_bf16[i] = f32_to_bf16(c.x[i]);
  if (bf16) activation_forward_bf16_keep_derivative(kind, z_bf16.data(), y_bf16.data(), M * N);
  std::vector<float> x = c.x, dx(M * K), dw(N * K, 0.0f), db(N, 0.0f), d_pre(M * N, 7.0f);
  c.op().backward_through_activation(kind, dx.data(), Output::kOverwrite, dw.data(), db.data(),
                                     bf16 ? Rows{nullptr, dz_bf16.data()} : Rows{dz.data()},
                                     bf16 ? Rows{nullptr, y_bf16.data()} : Rows{y.data()},
                                     bf16 ? Rows{nullptr, nullptr} : Rows{z.data()}, d_pre.data(),
                                     Rows{x.data(), bf16 ? x_bf16.data() : nullptr},
                                     LinearScratch{dy_bf16.data()}, M);
  const auto xr = c.xr(), wr = c.wr();
  std::vector<double> dyr(M * N), want_dx(M * K, 0.0), want_db(N, 0.0), abs_db(N, 0.0);
  for (std::int64_t i = 0; i < M * N; ++i)
    dyr[i] = bf16 ? bf16_to_f32(f32_to_bf16(static_cast<float>(dyd[i]))) : dyd[i];
  for (std::int64_t m = 0; m < M; ++m) {
    for (std::int64_t k = 0; k < K; ++k)
      for (std::int64_t n = 0; n < N; ++n) want_dx[m * K + k] += dyr[m * N + n] * wr[n * K + k];
    for (std::int64_t n = 0; n < N; ++n) {
      want_db[n] += dyd[m * N + n];
      abs_db[n] += std::fabs(dyd[m * N + n]);
    }
  }
  EXPECT_LT(max_rel(dx.data(), want_dx), bf16 ? 1e-2 : 1e-5);
  double scale = 0;
  for (double v : want_db) scale = std::max(scale, std::fabs(v));
  for (std::int64_t n = 0; n < N; ++n) {  // fp32: as max_rel < 1e-5; bf16: the rounding of act'
    const double tol = bf16 ? std::ldexp(abs_db[n], -8) + 1e-6 * scale : 1e-5 * scale;
    EXPECT_NEAR(db[n], want_db[n], tol) << n;
  }
}

TEST(Linear, BackwardThroughActivation) {
  for (ActKind kind : {ActKind::kGelu, ActKind::kGeluNew, ActKind::kRelu}) {
    check_through_activation(false, kind);
    if (has_native_bf16()) check_through_activation(true, kind);
  }
}

}  // namespace
}  // namespace bertfit
