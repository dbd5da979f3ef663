// Attention: fast float kernel against the double reference over several shapes, with padded
// keys, a sequence with no real key, and dropout. Tolerances are per element, from running
// the error analysis on the actual data (sums of absolute values of the terms involved).
#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "base/parallel.h"
#include "kernels/cast.h"
#include "kernels/ref/ref.h"
#include "kernels/test_util.h"

namespace bertfit {
namespace {

using testing::all_close;
using testing::FloatView;
using testing::kU;
using testing::Rng;

constexpr std::uint64_t kKey = 0xfeedbeef12345ull;

struct Data {
  AttentionShape s;
  float p;
  std::vector<std::int32_t> mask;
  FloatView qkv, dout;
  Data(AttentionShape shape, float prob, std::uint64_t seed)
      : s(shape),
        p(prob),
        mask(static_cast<std::size_t>(shape.B) * shape.T, 1),
        qkv(static_cast<std::int64_t>(shape.B) * shape.T * 3 * shape.C),
        dout(static_cast<std::int64_t>(shape.B) * shape.T * shape.C) {
    Rng rng(seed);
    qkv.fill_uniform(rng, -1, 1);
    dout.fill_uniform(rng, -1, 1);
    // Sequence 1 has its first key and its last third masked (when T > 1); sequence 2 (if
    // any) has no real key.
    for (int b = 1; b < s.B; ++b) {
      for (int t = 0; t < s.T; ++t) {
        if (b == 2 || (t == 0 && s.T > 1) || t >= s.T - s.T / 3) mask[b * s.T + t] = 0;
      }
    }
  }
  std::int64_t q(int b, int t, int h, int d) const {
    return (static_cast<std::int64_t>(b) * s.T + t) * 3 * s.C + h * (s.C / s.H) + d;
  }
  std::int64_t o(int b, int t, int h, int d) const {
    return (static_cast<std::int64_t>(b) * s.T + t) * s.C + h * (s.C / s.H) + d;
  }
  std::int64_t pr(int b, int h, int i, int j) const {
    return ((static_cast<std::int64_t>(b) * s.H + h) * s.T + i) * s.T + j;
  }
};

// First-order error bounds of the float kernel, evaluated on the data (reference probs P and
// the dropout-scaled P̃). A length-L float sum of terms t errs by <= L·u·Σ|t|.
//  forward:  δs_ij <= (D+1)·u·Σ_d|q k|/√D;  δP_ij <= P_ij·(2·max_j δs_ij + 4u);
//            δout_id <= Σ_j (δP̃_ij + (T+1)·u·P̃_ij)·|v_jd|.
//  backward: A_ij = scale·Σ_d|dO v| bounds |dP|, R_i = Σ_j A_ij·P_ij bounds |r|,
//            Z_ij = P_ij·(A_ij + R_i) bounds |dS|; δdS <= (T + 2D + 6)·u·Z;
//            δdQ_id <= (2T + 2D + 8)·u·Σ_j Z_ij|k_jd|/√D, same for dK with q, and
//            δdV_jd <= (T+2)·u·Σ_i P̃_ij|dO_id|.
//  bf16 path (ub = bf16's unit roundoff, else 0): the scores are scaled after the sum (one
//  more rounding: D+3 in place of D+1); rounding P̃ adds ub·P̃_ij|v_jd| to δout; rounding dO
//  adds ub·A_ij to δdP, hence ub·Z_ij to δdS, and rounding dS another ub·Z_ij: 2·ub·Z in dQ, dK;
//  rounding P̃ and dO adds 2·ub·P̃_ij|dO_id| to δdV.
struct Bounds {
  std::vector<double> out, probs, dqkv;
};

Bounds error_bounds(const Data& x, const std::vector<double>& P, double ub = 0.0) {
  const AttentionShape& s = x.s;
  const int T = s.T, D = s.C / s.H;
  const double sd = std::sqrt(static_cast<double>(D));
  const double scale = x.p > 0 ? 1.0 / (1.0 - x.p) : 1.0;
  Bounds e{std::vector<double>(x.dout.size(), 0.0), std::vector<double>(P.size(), 0.0),
           std::vector<double>(x.qkv.size(), 0.0)};
  auto qkv = [&](std::int64_t i) { return std::fabs(static_cast<double>(x.qkv[i])); };
  for (int b = 0; b < s.B; ++b) {
    for (int h = 0; h < s.H; ++h) {
      for (int i = 0; i < T; ++i) {
        double ds_max = 0.0, R = 0.0;
        std::vector<double> A(T);
        for (int j = 0; j < T; ++j) {
          double qk = 0.0, dov = 0.0;
          for (int d = 0; d < D; ++d) {
            qk += qkv(x.q(b, i, h, d)) * qkv(x.q(b, j, h, d) + s.C);
            dov += std::fabs(x.dout[x.o(b, i, h, d)]) * qkv(x.q(b, j, h, d) + 2 * s.C);
          }
          ds_max = std::max(ds_max, (ub > 0 ? D + 3 : D + 1) * kU * qk / sd);
          A[j] = scale * dov;
          R += A[j] * P[x.pr(b, h, i, j)];
        }
        for (int j = 0; j < T; ++j) {
          const double pij = P[x.pr(b, h, i, j)];
          const double dp = pij * (2 * ds_max + 4 * kU);
          e.probs[x.pr(b, h, i, j)] = dp;
          const double Z = pij * (A[j] + R);
          for (int d = 0; d < D; ++d) {
            const double vjd = qkv(x.q(b, j, h, d) + 2 * s.C);
            e.out[x.o(b, i, h, d)] += scale * (dp + ((T + 1) * kU + ub) * pij) * vjd;
            e.dqkv[x.q(b, i, h, d)] +=
                ((2 * T + 2 * D + 8) * kU + 2 * ub) * Z * qkv(x.q(b, j, h, d) + s.C) / sd;
            e.dqkv[x.q(b, j, h, d) + s.C] +=
                ((2 * T + 2 * D + 8) * kU + 2 * ub) * Z * qkv(x.q(b, i, h, d)) / sd;
            e.dqkv[x.q(b, j, h, d) + 2 * s.C] +=
                ((T + 2) * kU + 2 * ub) * scale * pij * std::fabs(x.dout[x.o(b, i, h, d)]);
          }
        }
      }
    }
  }
  return e;
}

void check_shape(AttentionShape s, float p) {
  SCOPED_TRACE(::testing::Message()
               << "B=" << s.B << " T=" << s.T << " C=" << s.C << " H=" << s.H << " p=" << p);
  Data x(s, p, s.T * 131 + s.C);
  const std::int64_t nprobs = static_cast<std::int64_t>(s.B) * s.H * s.T * s.T;
  FloatView out(x.dout.size()), probs(nprobs), dqkv(x.qkv.size());
  attention_forward(out.data(), probs.data(), x.qkv.data(), x.mask.data(), s, p, kKey);
  const std::vector<double> qkvd = x.qkv.to_double();
  std::vector<double> rout(out.size()), rprobs(nprobs);
  ref::attention_forward(rout.data(), rprobs.data(), qkvd.data(), x.mask.data(), s, p, kKey);
  const Bounds e = error_bounds(x, rprobs);
  // Factor 2 over the first-order bounds; masked keys must be exactly 0 (bound 0).
  EXPECT_TRUE(all_close(probs.data(), rprobs.data(), nprobs,
                        [&](std::int64_t i) { return 2 * e.probs[i] + kU * rprobs[i]; }));
  EXPECT_TRUE(all_close(out.data(), rout.data(), out.size(),
                        [&](std::int64_t i) { return 2 * e.out[i] + kU * std::fabs(rout[i]); }));
  // Backward from the kernel's own float probs (what the model saves) on both sides.
  // dqkv is written, not summed into: NaN before, so every element must be overwritten.
  dqkv.fill(std::numeric_limits<float>::quiet_NaN());
  std::vector<double> rd(dqkv.size(), 0.0);
  const std::vector<double> d0 = rd;
  ref::attention_backward(rd.data(), x.dout.to_double().data(), qkvd.data(),
                          probs.to_double().data(), s, p, kKey);
  attention_backward(dqkv.data(), x.dout.data(), x.qkv.data(), probs.data(), x.mask.data(), s, p,
                     kKey);
  EXPECT_TRUE(all_close(dqkv.data(), rd.data(), dqkv.size(), [&](std::int64_t i) {
    return 2 * e.dqkv[i] + 2 * kU * (std::fabs(rd[i]) + std::fabs(d0[i]));
  }));
}

TEST(Attention, MatchesReference) {
  for (float p : {0.0f, 0.1f}) {
    check_shape({1, 1, 1, 1}, p);
    check_shape({3, 7, 12, 3}, p);     // sequence 2 has no real key
    check_shape({2, 17, 64, 1}, p);    // D = 64, one head
    check_shape({2, 65, 128, 2}, p);   // T = 65
    check_shape({2, 33, 768, 12}, p);  // BERT-base heads
  }
}

TEST(Attention, MaskedKeysGetZeroAndEmptyRowsAreUniform) {
  const AttentionShape s{3, 6, 8, 2};
  Data x(s, 0.0f, 5);
  FloatView out(x.dout.size()), probs(static_cast<std::int64_t>(s.B) * s.H * s.T * s.T);
  attention_forward(out.data(), probs.data(), x.qkv.data(), x.mask.data(), s, 0.0f, kKey);
  for (int h = 0; h < s.H; ++h) {
    for (int i = 0; i < s.T; ++i) {
      for (int j = 0; j < s.T; ++j) {
        if (x.mask[1 * s.T + j] == 0) {
          EXPECT_EQ(probs[x.pr(1, h, i, j)], 0.0f);
        }
        EXPECT_EQ(probs[x.pr(2, h, i, j)], 1.0f / s.T);
      }
    }
  }
}

TEST(Attention, MaskedKeysWithHugeScoresDoNotDisturbTheSoftmax) {
  // All q = 1 and the masked keys' k = 1000: their scores (~1000·√D) would swamp the real
  // ones if they took part in the max or the sum (exp underflow, then 0/0).
  const AttentionShape s{2, 6, 8, 2};
  Data x(s, 0.0f, 6);
  for (int b = 0; b < s.B; ++b) {
    for (int t = 0; t < s.T; ++t) {
      for (int c = 0; c < s.C; ++c) {
        x.qkv[x.q(b, t, 0, c)] = 1.0f;
        if (x.mask[b * s.T + t] == 0) x.qkv[x.q(b, t, 0, c) + s.C] = 1000.0f;
      }
    }
  }
  FloatView out(x.dout.size()), probs(static_cast<std::int64_t>(s.B) * s.H * s.T * s.T);
  attention_forward(out.data(), probs.data(), x.qkv.data(), x.mask.data(), s, 0.0f, kKey);
  std::vector<double> rout(out.size()), rprobs(probs.size());
  ref::attention_forward(rout.data(), rprobs.data(), x.qkv.to_double().data(), x.mask.data(), s,
                         0.0f, kKey);
  const Bounds e = error_bounds(x, rprobs);
  EXPECT_TRUE(all_close(out.data(), rout.data(), out.size(),
                        [&](std::int64_t i) { return 2 * e.out[i] + kU * std::fabs(rout[i]); }));
}

// Unpadded execution: with skip_padding_queries the rows of real queries (up to each sequence's
// last real token) are bit for bit those of the full computation, and so is the gradient when
// the padding rows' output gradient is zero (as the caller's unpacking makes it).
TEST(Attention, SkippingPaddingQueriesChangesNoRealRow) {
  for (float p : {0.0f, 0.1f}) {
    AttentionShape s{3, 12, 16, 2};
    Data x(s, p, 9);
    std::vector<int> kend(s.B, s.T);
    for (int b = 0; b < s.B; ++b) {
      int k = s.T;
      while (k > 0 && x.mask[b * s.T + k - 1] == 0) --k;
      kend[b] = k == 0 ? s.T : k;
      for (int t = kend[b]; t < s.T; ++t)
        for (int c = 0; c < s.C; ++c)
          x.dout[(static_cast<std::int64_t>(b) * s.T + t) * s.C + c] = 0;
    }
    ASSERT_LT(kend[1], s.T) << "sequence 1 must end with padding";
    const std::int64_t nprobs = static_cast<std::int64_t>(s.B) * s.H * s.T * s.T;
    FloatView out_full(x.dout.size()), probs_full(nprobs), d_full(x.qkv.size());
    FloatView out_skip(x.dout.size()), probs_skip(nprobs), d_skip(x.qkv.size());
    attention_forward(out_full.data(), probs_full.data(), x.qkv.data(), x.mask.data(), s, p, kKey);
    attention_backward(d_full.data(), x.dout.data(), x.qkv.data(), probs_full.data(), x.mask.data(),
                       s, p, kKey);
    AttentionShape skip = s;
    skip.skip_padding_queries = true;
    attention_forward(out_skip.data(), probs_skip.data(), x.qkv.data(), x.mask.data(), skip, p,
                      kKey);
    attention_backward(d_skip.data(), x.dout.data(), x.qkv.data(), probs_skip.data(), x.mask.data(),
                       skip, p, kKey);
    for (int b = 0; b < s.B; ++b) {
      for (int t = 0; t < kend[b]; ++t) {
        const std::int64_t row = static_cast<std::int64_t>(b) * s.T + t;
        for (int c = 0; c < s.C; ++c) ASSERT_EQ(out_skip[row * s.C + c], out_full[row * s.C + c]);
      }
      for (int t = 0; t < s.T; ++t) {
        const std::int64_t row = static_cast<std::int64_t>(b) * s.T + t;
        for (int c = 0; c < 3 * s.C; ++c) {
          ASSERT_EQ(d_skip[row * 3 * s.C + c], d_full[row * 3 * s.C + c]) << b << " " << t;
        }
      }
    }
  }
}

// A classifier's last layer: with max_queries = 1 only each sequence's first query row is
// computed; it is bit for bit the full computation's, and so is the whole gradient when only
// first rows carry an output gradient.
TEST(Attention, FirstQueryRowOnlyMatchesTheFullComputation) {
  for (float p : {0.0f, 0.1f}) {
    for (bool skip_padding : {false, true}) {
      AttentionShape s{3, 12, 16, 2};
      s.skip_padding_queries = skip_padding;
      Data x(s, p, 11);
      for (int b = 0; b < s.B; ++b)
        for (int t = 1; t < s.T; ++t)
          for (int c = 0; c < s.C; ++c)
            x.dout[(static_cast<std::int64_t>(b) * s.T + t) * s.C + c] = 0;
      const std::int64_t nprobs = static_cast<std::int64_t>(s.B) * s.H * s.T * s.T;
      FloatView out_full(x.dout.size()), probs_full(nprobs), d_full(x.qkv.size());
      FloatView out_one(x.dout.size()), probs_one(nprobs), d_one(x.qkv.size());
      attention_forward(out_full.data(), probs_full.data(), x.qkv.data(), x.mask.data(), s, p,
                        kKey);
      attention_backward(d_full.data(), x.dout.data(), x.qkv.data(), probs_full.data(),
                         x.mask.data(), s, p, kKey);
      AttentionShape one = s;
      one.max_queries = 1;
      attention_forward(out_one.data(), probs_one.data(), x.qkv.data(), x.mask.data(), one, p,
                        kKey);
      attention_backward(d_one.data(), x.dout.data(), x.qkv.data(), probs_one.data(), x.mask.data(),
                         one, p, kKey);
      for (int b = 0; b < s.B; ++b) {
        const std::int64_t row = static_cast<std::int64_t>(b) * s.T;
        for (int c = 0; c < s.C; ++c) ASSERT_EQ(out_one[row * s.C + c], out_full[row * s.C + c]);
      }
      for (std::int64_t i = 0; i < x.qkv.size(); ++i) ASSERT_EQ(d_one[i], d_full[i]) << i;
    }
  }
}

// From a bf16 qkv (products on bf16 operands): against the double reference on the same bf16
// values, within the float bounds plus the bf16 roundings of P̃, dO and dS (error_bounds with
// ub = 2^-9), over the shapes of MatchesReference (odd D, odd key and query counts, padding,
// a sequence without real keys) with and without dropout and padding skips.
void check_shape_bf16(AttentionShape s, float p) {
  SCOPED_TRACE(::testing::Message()
               << "bf16 B=" << s.B << " T=" << s.T << " C=" << s.C << " H=" << s.H << " p=" << p
               << " skip " << s.skip_padding_queries << " max_queries " << s.max_queries);
  constexpr double kUb = 1.0 / (1 << 9);
  Data x(s, p, s.T * 137 + s.C);
  std::vector<std::uint16_t> qkv_bf16(x.qkv.size());
  cast_f32_to_bf16(qkv_bf16.data(), x.qkv.data(), x.qkv.size());
  for (std::int64_t i = 0; i < x.qkv.size(); ++i) {  // the reference sees the bf16 values
    x.qkv[i] = std::bit_cast<float>(static_cast<std::uint32_t>(qkv_bf16[i]) << 16);
  }
  const std::int64_t nprobs = static_cast<std::int64_t>(s.B) * s.H * s.T * s.T;
  FloatView out(x.dout.size()), probs(nprobs), dqkv(x.qkv.size());
  attention_forward(out.data(), probs.data(), qkv_bf16.data(), x.mask.data(), s, p, kKey);
  const std::vector<double> qkvd = x.qkv.to_double();
  std::vector<double> rout(out.size()), rprobs(nprobs);
  ref::attention_forward(rout.data(), rprobs.data(), qkvd.data(), x.mask.data(), s, p, kKey);
  const Bounds e = error_bounds(x, rprobs, kUb);
  // Rows the kernel skips (padding queries, rows past max_queries) are left untouched: compare
  // the computed rows only.
  auto computed = [&](int b, int i) {
    int kend = s.T;
    while (kend > 0 && x.mask[b * s.T + kend - 1] == 0) --kend;
    if (kend == 0) kend = s.T;
    int qend = s.skip_padding_queries ? kend : s.T;
    if (s.max_queries > 0) qend = std::min(qend, s.max_queries);
    return i < qend;
  };
  for (int b = 0; b < s.B; ++b) {
    for (int i = 0; i < s.T; ++i) {
      if (!computed(b, i)) continue;
      for (int h = 0; h < s.H; ++h) {
        for (int j = 0; j < s.T; ++j) {
          const std::int64_t k = x.pr(b, h, i, j);
          ASSERT_NEAR(probs[k], rprobs[k], 2 * e.probs[k] + kU * rprobs[k]) << b << " " << i;
        }
      }
      for (int c = 0; c < s.C; ++c) {
        const std::int64_t k = (static_cast<std::int64_t>(b) * s.T + i) * s.C + c;
        ASSERT_NEAR(out[k], rout[k], 2 * e.out[k] + kU * std::fabs(rout[k])) << b << " " << i;
      }
    }
  }
  // Backward from the kernel's own probs on both sides; the skipped rows' output gradient is
  // zero (as the model's unpacking makes it), so the reference sees no contribution from them.
  for (int b = 0; b < s.B; ++b) {
    for (int i = 0; i < s.T; ++i) {
      if (computed(b, i)) continue;
      for (int c = 0; c < s.C; ++c) x.dout[(static_cast<std::int64_t>(b) * s.T + i) * s.C + c] = 0;
      for (int h = 0; h < s.H; ++h) {
        for (int j = 0; j < s.T; ++j) probs[x.pr(b, h, i, j)] = 0;
      }
    }
  }
  // dqkv is written, not summed into: NaN before, so every element must be overwritten.
  dqkv.fill(std::numeric_limits<float>::quiet_NaN());
  std::vector<double> rd(dqkv.size(), 0.0);
  const std::vector<double> d0 = rd;
  ref::attention_backward(rd.data(), x.dout.to_double().data(), qkvd.data(),
                          probs.to_double().data(), s, p, kKey);
  attention_backward(dqkv.data(), x.dout.data(), qkv_bf16.data(), probs.data(), x.mask.data(), s, p,
                     kKey);
  const Bounds eb = error_bounds(x, probs.to_double(), kUb);
  EXPECT_TRUE(all_close(dqkv.data(), rd.data(), dqkv.size(), [&](std::int64_t i) {
    return 2 * eb.dqkv[i] + 2 * kU * (std::fabs(rd[i]) + std::fabs(d0[i]));
  }));
}

TEST(Attention, Bf16QkvMatchesReferenceWithinBf16OperandRounding) {
  for (float p : {0.0f, 0.1f}) {
    check_shape_bf16({1, 1, 1, 1}, p);
    check_shape_bf16({3, 7, 12, 3}, p);     // sequence 2 has no real key; D = 4
    check_shape_bf16({2, 9, 15, 3}, p);     // D = 5 (odd)
    check_shape_bf16({2, 17, 64, 1}, p);    // D = 64, one head
    check_shape_bf16({2, 65, 128, 2}, p);   // T = 65
    check_shape_bf16({2, 33, 768, 12}, p);  // BERT-base heads
    for (int max_queries : {0, 1}) {
      AttentionShape s{3, 12, 16, 2};
      s.skip_padding_queries = true;
      s.max_queries = max_queries;
      check_shape_bf16(s, p);
    }
  }
}

TEST(Attention, IndependentOfThreadCount) {
  const AttentionShape s{2, 9, 24, 3};
  Data x(s, 0.2f, 8);
  const int saved = num_threads();
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 4}) {
    set_num_threads(threads);
    FloatView out(x.dout.size()), probs(static_cast<std::int64_t>(s.B) * s.H * s.T * s.T),
        dqkv(x.qkv.size());
    attention_forward(out.data(), probs.data(), x.qkv.data(), x.mask.data(), s, x.p, kKey);
    attention_backward(dqkv.data(), x.dout.data(), x.qkv.data(), probs.data(), x.mask.data(), s,
                       x.p, kKey);
    std::vector<float> all(out.data(), out.data() + out.size());
    all.insert(all.end(), dqkv.data(), dqkv.data() + dqkv.size());
    results.push_back(all);
  }
  set_num_threads(saved);
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

}  // namespace
}  // namespace bertfit
