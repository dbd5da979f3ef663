// Blockwise attention against the double reference (windows, padding, skipped padding queries,
// max_queries, dropout, fp32 and bf16 qkv, sizes across and between blocks), against the plain
// kernel on the shapes both run, and finite differences of the reference forward with a window.
#include "kernels/attention_blockwise.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "base/dtype.h"
#include "kernels/attention.h"
#include "kernels/cast.h"
#include "kernels/dropout.h"
#include "kernels/gradcheck_util.h"
#include "kernels/ref/ref.h"

namespace bertfit {
namespace {

constexpr std::uint64_t kKey = 0x5eed0123abcdull;

// Masks: sequence 0 all real; 1 its last third padding; 2 a masked key inside and a padded
// tail; 3 no real key.
std::vector<std::int32_t> make_mask(int B, int T) {
  std::vector<std::int32_t> m(static_cast<std::size_t>(B) * T, 1);
  for (int b = 1; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      const bool pad =
          (b == 1 && t >= T - T / 3) || (b == 2 && (t == T / 2 || t >= T - 2)) || (b == 3);
      if (pad && (t > 0 || b == 3)) m[b * T + t] = 0;
    }
  }
  return m;
}

struct Case {
  AttentionShape s;
  float p;
  std::vector<std::int32_t> mask;
  std::vector<float> qkv, dout;
  Case(AttentionShape shape, float prob) : s(shape), p(prob), mask(make_mask(shape.B, shape.T)) {
    testing::Rng rng(static_cast<std::uint64_t>(shape.T) * 977 + shape.C * 13 + shape.window + 7);
    qkv = testing::random_floats(rng, static_cast<std::size_t>(s.B) * s.T * 3 * s.C, -1.5, 1.5);
    dout = testing::random_floats(rng, static_cast<std::size_t>(s.B) * s.T * s.C, -1, 1);
  }
  // Query row t of sequence b is computed (the others are the caller's to discard).
  bool computed(int b, int t) const {
    int kend = s.T;
    while (kend > 0 && mask[b * s.T + kend - 1] == 0) --kend;
    int qend = s.skip_padding_queries && kend > 0 ? kend : s.T;
    if (s.max_queries > 0) qend = std::min(qend, s.max_queries);
    return t < qend;
  }
};

std::string describe(const AttentionShape& s, float p) {
  return "B=" + std::to_string(s.B) + " T=" + std::to_string(s.T) + " C=" + std::to_string(s.C) +
         " H=" + std::to_string(s.H) + " window=" + std::to_string(s.window) +
         " skip=" + std::to_string(s.skip_padding_queries) +
         " maxq=" + std::to_string(s.max_queries) + " p=" + std::to_string(p);
}

// |got - want| <= tol · (max|want| + |want|) over the elements `use` selects.
template <class Want, class Use>
::testing::AssertionResult close(const std::vector<float>& got, const Want& want, double tol,
                                 Use use) {
  double scale = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (use(i)) scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  }
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (!use(i)) continue;
    const double w = want[i], e = std::fabs(got[i] - w);
    if (!(e <= tol * (scale + std::fabs(w)))) {
      return ::testing::AssertionFailure() << "element " << i << ": got " << got[i] << " want " << w
                                           << " (scale " << scale << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

struct Result {
  std::vector<float> out, lse, dqkv;
};

// The blockwise pair on fp32 qkv, or on its bf16 rounding.
Result run_blockwise(const Case& x, bool bf16) {
  const AttentionShape& s = x.s;
  Result r{std::vector<float>(x.dout.size(), 0.0f),
           std::vector<float>(static_cast<std::size_t>(s.B) * s.H * s.T, 0.0f),
           std::vector<float>(x.qkv.size(), std::numeric_limits<float>::quiet_NaN())};
  if (bf16) {
    std::vector<std::uint16_t> q16(x.qkv.size());
    cast_f32_to_bf16(q16.data(), x.qkv.data(), static_cast<std::int64_t>(q16.size()));
    attention_blockwise_forward(r.out.data(), r.lse.data(), q16.data(), x.mask.data(), s, x.p,
                                kKey);
    attention_blockwise_backward(r.dqkv.data(), x.dout.data(), q16.data(), r.out.data(),
                                 r.lse.data(), x.mask.data(), s, x.p, kKey);
  } else {
    attention_blockwise_forward(r.out.data(), r.lse.data(), x.qkv.data(), x.mask.data(), s, x.p,
                                kKey);
    attention_blockwise_backward(r.dqkv.data(), x.dout.data(), x.qkv.data(), r.out.data(),
                                 r.lse.data(), x.mask.data(), s, x.p, kKey);
  }
  return r;
}

// The plain kernel, the same way.
Result run_plain(const Case& x, bool bf16) {
  const AttentionShape& s = x.s;
  Result r{std::vector<float>(x.dout.size(), 0.0f),
           {},
           std::vector<float>(x.qkv.size(), std::numeric_limits<float>::quiet_NaN())};
  std::vector<float> probs(static_cast<std::size_t>(s.B) * s.H * s.T * s.T);
  if (bf16) {
    std::vector<std::uint16_t> q16(x.qkv.size());
    cast_f32_to_bf16(q16.data(), x.qkv.data(), static_cast<std::int64_t>(q16.size()));
    attention_forward(r.out.data(), probs.data(), q16.data(), x.mask.data(), s, x.p, kKey);
    attention_backward(r.dqkv.data(), x.dout.data(), q16.data(), probs.data(), x.mask.data(), s,
                       x.p, kKey);
  } else {
    attention_forward(r.out.data(), probs.data(), x.qkv.data(), x.mask.data(), s, x.p, kKey);
    attention_backward(r.dqkv.data(), x.dout.data(), x.qkv.data(), probs.data(), x.mask.data(), s,
                       x.p, kKey);
  }
  return r;
}

// Elements of (B,T,W) rows whose row is computed.
auto rows_computed(const Case& x, int W) {
  return [&x, W](std::size_t i) {
    const std::size_t t = i / W;
    return x.computed(static_cast<int>(t / x.s.T), static_cast<int>(t % x.s.T));
  };
}

// Against the double reference: the outputs of the computed rows, and the gradient from the
// computed rows' dout only (the others' dout zeroed: the kernel gives them no gradient).
void check_reference(AttentionShape s, float p, bool bf16) {
  SCOPED_TRACE(describe(s, p) + (bf16 ? " bf16" : " fp32"));
  Case x(s, p);
  for (std::size_t i = 0; i < x.dout.size(); ++i) {
    if (!rows_computed(x, s.C)(i)) x.dout[i] = 0.0f;
  }
  const Result got = run_blockwise(x, bf16);
  std::vector<double> qkv = testing::as_double(x.qkv);
  if (bf16) {
    for (double& v : qkv) v = bf16_to_f32(f32_to_bf16(static_cast<float>(v)));
  }
  std::vector<double> out(x.dout.size()), probs(static_cast<std::size_t>(s.B) * s.H * s.T * s.T),
      dqkv(x.qkv.size(), 0.0);
  ref::attention_forward(out.data(), probs.data(), qkv.data(), x.mask.data(), s, p, kKey);
  ref::attention_backward(dqkv.data(), testing::as_double(x.dout).data(), qkv.data(), probs.data(),
                          s, p, kKey);
  const double tol = bf16 ? 1.5e-2 : 2e-5;
  EXPECT_TRUE(close(got.out, out, tol, rows_computed(x, s.C)));
  EXPECT_TRUE(close(got.dqkv, dqkv, tol, [](std::size_t) { return true; }));
  // log-sum-exp: P_ij = e^(s_ij - lse_i), so lse_i = s_ij - log P_ij for any key seen.
  const int D = s.C / s.H;
  for (int b = 0; b < s.B; ++b) {
    for (int h = 0; h < s.H; ++h) {
      for (int i = 0; i < s.T; ++i) {
        if (!x.computed(b, i)) continue;
        int j = 0;
        while (probs[((std::size_t(b) * s.H + h) * s.T + i) * s.T + j] == 0.0) ++j;
        double sij = 0.0;
        bool any_real = false;
        for (int t = 0; t < s.T; ++t) any_real = any_real || x.mask[b * s.T + t] != 0;
        for (int d = 0; d < D && any_real; ++d) {
          sij += qkv[(std::size_t(b) * s.T + i) * 3 * s.C + h * D + d] *
                 qkv[(std::size_t(b) * s.T + j) * 3 * s.C + s.C + h * D + d];
        }
        sij /= std::sqrt(static_cast<double>(D));
        const double want = sij - std::log(probs[((std::size_t(b) * s.H + h) * s.T + i) * s.T + j]);
        EXPECT_NEAR(got.lse[(std::size_t(b) * s.H + h) * s.T + i], want,
                    (bf16 ? 2e-2 : 2e-5) * (1 + std::fabs(want)))
            << "b " << b << " h " << h << " i " << i;
      }
    }
  }
}

TEST(AttentionBlockwise, MatchesReference) {
  for (bool bf16 : {false, true}) {
    for (float p : {0.0f, 0.2f}) {
      for (int window : {-1, 0, 3, 40}) {
        AttentionShape s{4, 7, 12, 3};  // one block, D = 4
        s.window = window;
        check_reference(s, p, bf16);
        s = {4, 150, 10, 2};  // three query and key blocks, D = 5 (odd)
        s.window = window;
        check_reference(s, p, bf16);
      }
    }
  }
}

TEST(AttentionBlockwise, SkippedPaddingQueriesAndFirstRowsOnly) {
  for (bool bf16 : {false, true}) {
    for (int max_queries : {0, 1, 70}) {
      for (int window : {-1, 5}) {
        AttentionShape s{4, 131, 16, 2};
        s.skip_padding_queries = true;
        s.max_queries = max_queries;
        s.window = window;
        check_reference(s, 0.1f, bf16);
        s.skip_padding_queries = false;
        check_reference(s, 0.0f, bf16);
      }
    }
  }
}

// Rows past the computed queries: out untouched, dq zero.
TEST(AttentionBlockwise, LeavesRowsNotComputed) {
  AttentionShape s{2, 100, 8, 2};
  s.skip_padding_queries = true;
  s.window = 4;
  Case x(s, 0.0f);
  std::vector<float> out(x.dout.size(), 7.0f), lse(std::size_t(s.B) * s.H * s.T, 7.0f),
      dqkv(x.qkv.size(), std::numeric_limits<float>::quiet_NaN());
  attention_blockwise_forward(out.data(), lse.data(), x.qkv.data(), x.mask.data(), s, 0.0f, kKey);
  attention_blockwise_backward(dqkv.data(), x.dout.data(), x.qkv.data(), out.data(), lse.data(),
                               x.mask.data(), s, 0.0f, kKey);
  for (int b = 0; b < s.B; ++b) {
    for (int t = 0; t < s.T; ++t) {
      const std::size_t row = std::size_t(b) * s.T + t;
      for (int c = 0; c < 3 * s.C; ++c) {
        ASSERT_FALSE(std::isnan(dqkv[row * 3 * s.C + c])) << row << " " << c;
        if (!x.computed(b, t) && c < s.C) {
          EXPECT_EQ(dqkv[row * 3 * s.C + c], 0.0f);
        }
      }
      for (int c = 0; c < s.C; ++c) {
        if (!x.computed(b, t)) {
          EXPECT_EQ(out[row * s.C + c], 7.0f);
        }
      }
    }
  }
}

// The plain kernel and this one compute the same function, with the same dropout mask: equal to
// rounding (a different mask would differ by O(1)).
TEST(AttentionBlockwise, EqualsPlainKernel) {
  for (bool bf16 : {false, true}) {
    for (float p : {0.0f, 0.3f}) {
      for (int window : {-1, 2, 64}) {
        for (AttentionShape s : {AttentionShape{4, 200, 24, 3}, AttentionShape{3, 65, 64, 1},
                                 AttentionShape{2, 33, 768, 12}}) {
          s.window = window;
          s.skip_padding_queries = window == 2;
          SCOPED_TRACE(describe(s, p) + (bf16 ? " bf16" : " fp32"));
          const Case x(s, p);
          const Result a = run_blockwise(x, bf16), b = run_plain(x, bf16);
          const double tol = bf16 ? 1.5e-2 : 2e-5;
          EXPECT_TRUE(close(a.out, b.out, tol, rows_computed(x, s.C)));
          EXPECT_TRUE(close(a.dqkv, b.dqkv, tol, [](std::size_t) { return true; }));
        }
      }
    }
  }
}

// Finite differences of the reference forward with a window, padding and dropout, against the
// reference backward, then the blockwise backward against the reference backward.
TEST(AttentionBlockwise, GradientsMatchFiniteDifferences) {
  for (int window : {0, 2}) {
    AttentionShape s{3, 9, 8, 2};
    s.window = window;
    const float p = 0.25f;
    SCOPED_TRACE(describe(s, p));
    Case x(s, p);
    std::vector<double> qkv = testing::as_double(x.qkv), out(x.dout.size()),
                        probs(std::size_t(s.B) * s.H * s.T * s.T);
    const std::vector<double> dout = testing::as_double(x.dout);
    auto loss = [&] {
      ref::attention_forward(out.data(), probs.data(), qkv.data(), x.mask.data(), s, p, kKey);
      return testing::weighted_sum(dout, out);
    };
    loss();
    std::vector<double> dqkv(x.qkv.size(), 0.0);
    ref::attention_backward(dqkv.data(), dout.data(), qkv.data(), probs.data(), s, p, kKey);
    EXPECT_TRUE(testing::gradients_match(dqkv, testing::numeric_gradient(qkv, loss)));
    const Result got = run_blockwise(x, false);
    EXPECT_TRUE(testing::fast_matches_reference(got.dqkv.data(), dqkv, s.T + 2.0 * s.C / s.H));
  }
}

}  // namespace
}  // namespace bertfit
