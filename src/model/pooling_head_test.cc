// The embedding head alone (model/pooling_head.cc) on last-layer rows the test writes: every
// pooling mode, alone and concatenated, with and without Normalize, packed and padded rows,
// against a scalar reference over the padded batch; and its backward against central
// differences of f = Σ w·y; Dense modules after the pooling (every activation): forward against
// the reference and backward (into the rows and into W and b) against central differences. The
// whole path (encoder, pooling, Normalize) against
// sentence-transformers is tests/cli/embed_cli_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "model/activations.h"
#include "model/bert.h"
#include "model/family.h"
#include "model/head.h"
#include "model/st_folder.h"
#include "model/test_config.h"

namespace bertfit {
namespace {

struct Case {
  ModelConfig config;
  int B = 3, T = 5;
  std::vector<std::int32_t> ids, mask;
  std::vector<int> lengths = {5, 2, 3};
};

Case make_case(std::vector<Pooling> pooling, bool normalize) {
  Case k;
  k.config = small_test_config(model_family("bert"), 2);
  k.config.head = HeadKind::kEmbedding;
  k.config.pooling = std::move(pooling);
  k.config.normalize = normalize;
  for (int b = 0; b < k.B; ++b) {
    for (int t = 0; t < k.T; ++t) {
      k.ids.push_back(t == 0 ? 101 : 1000 + t);
      k.mask.push_back(t < k.lengths[b] ? 1 : 0);
    }
  }
  return k;
}

// Lays out the rows (packed or padded) and fills the last layer's output with values of the
// padded position p = b·T + t, so that the reference can read them by position.
struct Rows {
  Activations a;
  std::vector<float> padded;  // (B·T, C)
};

void lay_out(const Case& k, bool unpadded, Rows& rows) {
  const ModelConfig& c = k.config;
  Activations& a = rows.a;
  a.resize(c, k.B, k.T, /*for_training=*/true);
  a.layout_tokens(c, k.ids.data(), nullptr, k.mask.data(), unpadded);
  pooling_head().resize(c, a, k.B, a.N, true, false);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  rows.padded.resize(static_cast<std::size_t>(k.B) * k.T * c.hidden);
  for (float& v : rows.padded) v = normal(rng);
  float* out = a.layer_out(c.layers - 1);
  for (std::int64_t r = 0; r < a.N; ++r) {
    const std::int64_t p = a.packed ? a.token_rows[r] : r;
    std::copy_n(rows.padded.data() + p * c.hidden, c.hidden, out + r * c.hidden);
  }
}

// The reference: sentence-transformers' Pooling.forward over the padded batch, in double.
std::vector<double> reference(const Case& k, const std::vector<float>& x) {
  const int C = k.config.hidden;
  std::vector<double> y;
  for (int b = 0; b < k.B; ++b) {
    std::vector<double> row;
    for (Pooling mode : k.config.pooling) {
      for (int ch = 0; ch < C; ++ch) {
        double sum = 0, mx = -1e300;
        for (int t = 0; t < k.lengths[b]; ++t) {
          const double v = x[(static_cast<std::size_t>(b) * k.T + t) * C + ch];
          sum += v;
          mx = std::max(mx, v);
        }
        const double n = k.lengths[b];
        const double first = x[(static_cast<std::size_t>(b) * k.T) * C + ch];
        const double last = x[(static_cast<std::size_t>(b) * k.T + k.lengths[b] - 1) * C + ch];
        switch (mode) {
          case Pooling::kCls:
            row.push_back(first);
            break;
          case Pooling::kMean:
            row.push_back(sum / n);
            break;
          case Pooling::kMax:
            row.push_back(mx);
            break;
          case Pooling::kMeanSqrtLen:
            row.push_back(sum / std::sqrt(n));
            break;
          case Pooling::kLastToken:
            row.push_back(last);
            break;
        }
      }
    }
    if (k.config.normalize) {
      double sq = 0;
      for (double v : row) sq += v * v;
      for (double& v : row) v /= std::max(std::sqrt(sq), 1e-12);
    }
    y.insert(y.end(), row.begin(), row.end());
  }
  return y;
}

const std::vector<std::vector<Pooling>> kPoolings = {
    {Pooling::kCls},
    {Pooling::kMean},
    {Pooling::kMax},
    {Pooling::kMeanSqrtLen},
    {Pooling::kLastToken},
    {Pooling::kCls, Pooling::kMax, Pooling::kMean, Pooling::kMeanSqrtLen, Pooling::kLastToken}};

TEST(PoolingHead, EveryModeMatchesTheReference) {
  for (const auto& pooling : kPoolings) {
    for (bool normalize : {false, true}) {
      for (bool unpadded : {true, false}) {
        SCOPED_TRACE(::testing::Message()
                     << pooling_name(pooling[0]) << " x" << pooling.size() << " normalize "
                     << normalize << " unpadded " << unpadded);
        const Case k = make_case(pooling, normalize);
        const ParamLayout layout(k.config);
        BertModel model(k.config, layout);
        const ModelWeights w = model.make_weights();
        Rows rows;
        lay_out(k, unpadded, rows);
        EXPECT_EQ(rows.a.packed, unpadded);
        pooling_head().forward(w, DropoutState{}, rows.a);
        const std::vector<double> want = reference(k, rows.padded);
        const int D = pooling_head().output_width(k.config);
        ASSERT_EQ(static_cast<std::size_t>(k.B) * D, want.size());
        for (std::size_t i = 0; i < want.size(); ++i) {
          EXPECT_NEAR(rows.a.logits[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << i;
        }
      }
    }
  }
}

// d(Σ w·y)/dx by the head's backward against central differences of the reference (in double),
// for every element of every real row; padding rows get no gradient.
TEST(PoolingHead, BackwardMatchesCentralDifferences) {
  for (const auto& pooling : kPoolings) {
    for (bool normalize : {false, true}) {
      SCOPED_TRACE(::testing::Message() << pooling_name(pooling[0]) << " x" << pooling.size()
                                        << " normalize " << normalize);
      const Case k = make_case(pooling, normalize);
      const ParamLayout layout(k.config);
      BertModel model(k.config, layout);
      const ModelWeights w = model.make_weights();
      Rows rows;
      lay_out(k, /*unpadded=*/false, rows);
      Activations& a = rows.a;
      pooling_head().forward(w, DropoutState{}, a);
      const int D = pooling_head().output_width(k.config), C = k.config.hidden;
      std::mt19937 rng(11);
      std::normal_distribution<float> normal;
      std::vector<float> weight(static_cast<std::size_t>(k.B) * D);
      for (float& v : weight) v = normal(rng);
      std::copy(weight.begin(), weight.end(), a.dlogits.data());
      const std::vector<std::int64_t> no_groups;
      GradsReady ready(no_groups, {});
      pooling_head().backward(w, DropoutState{}, nullptr, a, ready);
      auto f = [&](const std::vector<float>& x) {
        const std::vector<double> y = reference(k, x);
        double s = 0;
        for (std::size_t i = 0; i < y.size(); ++i) s += weight[i] * y[i];
        return s;
      };
      std::vector<float> x = rows.padded;
      const float h = 1e-2f;
      // Max pooling's derivative is a step: where a channel's two largest values are within 2h,
      // central differences straddle it; those two positions are not compared (a few of the 48
      // channels of normal draws).
      auto near_tie = [&](std::size_t p) {
        const int b = static_cast<int>(p / C / k.T), ch = static_cast<int>(p % C);
        int close = 0;
        for (int t = 0; t < k.lengths[b]; ++t) {
          close += std::abs(x[(static_cast<std::size_t>(b) * k.T + t) * C + ch] - x[p]) < 2 * h;
        }
        return close > 1;
      };
      const bool has_max = std::count(pooling.begin(), pooling.end(), Pooling::kMax) > 0;
      for (std::size_t p = 0; p < x.size(); ++p) {
        const int b = static_cast<int>(p / C / k.T), t = static_cast<int>(p / C % k.T);
        if (has_max && t < k.lengths[b] && near_tie(p)) continue;
        const float saved = x[p];
        x[p] = saved + h;
        const double up = f(x);
        x[p] = saved - h;
        const double down = f(x);
        x[p] = saved;
        const double numeric = t < k.lengths[b] ? (up - down) / (2 * h) : 0.0;
        EXPECT_NEAR(a.d_out[p], numeric, 2e-3 * (1 + std::abs(numeric))) << "position " << p;
      }
    }
  }
}

// The reference of a model with Dense modules: the pooled vectors of `reference` (without
// Normalize), then y = act(W x + b) per module in double, then Normalize.
double activate_ref(DenseActivation act, double x) {
  switch (act) {
    case DenseActivation::kTanh:
      return std::tanh(x);
    case DenseActivation::kIdentity:
      return x;
    case DenseActivation::kRelu:
      return x > 0 ? x : 0;
    case DenseActivation::kGelu:
      return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  }
  return x;
}

std::vector<double> dense_reference(const Case& k, const std::vector<float>& x,
                                    const ParamLayout& layout, const std::vector<float>& params) {
  Case pooled = k;
  pooled.config.normalize = false;
  std::vector<double> v = reference(pooled, x);
  int in = static_cast<int>(k.config.pooling.size()) * k.config.hidden;
  for (std::size_t i = 0; i < k.config.dense.size(); ++i) {
    const DenseLayer& d = k.config.dense[i];
    const float* W = params.data() + layout.offset(dense_role(i));
    const float* bias = params.data() + layout.offset(dense_bias_role(i));
    std::vector<double> y;
    for (int b = 0; b < k.B; ++b) {
      for (int o = 0; o < d.out_features; ++o) {
        double s = bias[o];
        for (int j = 0; j < in; ++j) s += double{W[o * in + j]} * v[b * in + j];
        y.push_back(activate_ref(d.activation, s));
      }
    }
    v = std::move(y);
    in = d.out_features;
  }
  if (k.config.normalize) {
    for (int b = 0; b < k.B; ++b) {
      double sq = 0;
      for (int j = 0; j < in; ++j) sq += v[b * in + j] * v[b * in + j];
      for (int j = 0; j < in; ++j) v[b * in + j] /= std::max(std::sqrt(sq), 1e-12);
    }
  }
  return v;
}

TEST(PoolingHead, DenseModulesMatchTheReferenceAndCentralDifferences) {
  for (DenseActivation act : {DenseActivation::kTanh, DenseActivation::kIdentity,
                              DenseActivation::kRelu, DenseActivation::kGelu}) {
    for (bool normalize : {false, true}) {
      SCOPED_TRACE(::testing::Message()
                   << dense_activation_name(act) << " normalize " << normalize);
      Case k = make_case({Pooling::kMean, Pooling::kCls}, normalize);
      const int P = 2 * k.config.hidden;
      k.config.dense = {{P, 6, act}, {6, 5, DenseActivation::kTanh}};
      const ParamLayout layout(k.config);
      ASSERT_EQ(layout.entry(dense_role(0)).name, "2_Dense.linear.weight");
      ASSERT_EQ(layout.entry(dense_bias_role(1)).name, "3_Dense.linear.bias");
      ASSERT_EQ(layout.grad_ready_offsets().front(), layout.offset(dense_role(0)));
      std::vector<float> params(layout.total());
      std::mt19937 rng(5);
      std::normal_distribution<float> normal(0.0f, 0.3f);
      for (float& v : params) v = normal(rng);
      BertModel model(k.config, layout);
      ModelWeights w = model.make_weights();
      w.prepare(params.data(), /*with_backward=*/true);
      Rows rows;
      lay_out(k, /*unpadded=*/true, rows);
      Activations& a = rows.a;
      pooling_head().forward(w, DropoutState{}, a);
      const int D = pooling_head().output_width(k.config), C = k.config.hidden;
      ASSERT_EQ(D, 5);
      const std::vector<double> want = dense_reference(k, rows.padded, layout, params);
      ASSERT_EQ(want.size(), static_cast<std::size_t>(k.B) * D);
      for (std::size_t i = 0; i < want.size(); ++i) {
        EXPECT_NEAR(a.logits[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << i;
      }
      std::vector<float> weight(static_cast<std::size_t>(k.B) * D);
      for (float& v : weight) v = normal(rng);
      std::copy(weight.begin(), weight.end(), a.dlogits.data());
      std::vector<float> grads(layout.total(), 0.0f);
      std::vector<std::int64_t> reported;
      const std::function<void(std::int64_t)> report = [&](std::int64_t o) {
        reported.push_back(o);
      };
      GradsReady ready(layout.grad_ready_offsets(), report);
      pooling_head().backward(w, DropoutState{}, grads.data(), a, ready);
      ASSERT_EQ(reported.size(), 1u);  // the head's one group, the Dense tensors'
      EXPECT_EQ(reported[0], layout.offset(dense_role(0)));
      std::vector<float> x = rows.padded;
      auto f = [&]() {
        const std::vector<double> y = dense_reference(k, x, layout, params);
        double s = 0;
        for (std::size_t i = 0; i < y.size(); ++i) s += weight[i] * y[i];
        return s;
      };
      auto central = [&](float& v, float h) {
        const float saved = v;
        v = saved + h;
        const double up = f();
        v = saved - h;
        const double down = f();
        v = saved;
        return (up - down) / (2 * h);
      };
      // Into the last layer's rows (packed: the real tokens only).
      ASSERT_TRUE(a.packed);
      for (std::int64_t r = 0; r < a.N; ++r) {
        const std::int64_t p = a.token_rows[r];
        for (int ch = 0; ch < C; ch += 7) {
          const double numeric = central(x[p * C + ch], 1e-2f);
          EXPECT_NEAR(a.d_out[r * C + ch], numeric, 2e-3 * (1 + std::abs(numeric)))
              << "padded row " << p << " channel " << ch;
        }
      }
      // Into W and b of both modules (ReLU's kink: a pre-activation within h of 0 is skipped
      // by the tolerance's scale only when it is not crossed; the draws keep them apart).
      for (std::size_t i = 0; i < k.config.dense.size(); ++i) {
        for (Role role : {dense_role(i), dense_bias_role(i)}) {
          const ParamEntry& e = layout.entry(role);
          for (std::int64_t j = 0; j < e.size; j += 5) {
            const double numeric = central(params[e.offset + j], 1e-3f);
            EXPECT_NEAR(grads[e.offset + j], numeric, 2e-3 * (1 + std::abs(numeric)))
                << e.name << " element " << j;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace bertfit
