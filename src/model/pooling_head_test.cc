// The embedding head alone (model/pooling_head.cc) on last-layer rows the test writes: every
// pooling mode, alone and concatenated, with and without Normalize, packed and padded rows,
// against a scalar reference over the padded batch; and its backward against central
// differences of f = Σ w·y. The whole path (encoder, pooling, Normalize) against
// sentence-transformers is tests/cli/embed_cli_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "model/activations.h"
#include "model/bert.h"
#include "model/family.h"
#include "model/head.h"
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

}  // namespace
}  // namespace bertfit
