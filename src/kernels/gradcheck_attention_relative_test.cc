// DeBERTa's disentangled attention (kernels/attention_relative.h): finite differences of the
// double reference forward against the reference backward (w.r.t. qkv and both projections of
// the relative embeddings), then the fast kernels (fp32 and bf16 QKV) against the reference,
// with padded keys, dropout, c2p and p2c alone and together, and row tables that clamp.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "base/dtype.h"
#include "kernels/attention_relative.h"
#include "kernels/cast.h"
#include "kernels/dropout.h"
#include "kernels/gradcheck_util.h"
#include "kernels/ref/ref.h"

namespace bertfit {
namespace {

using namespace bertfit::testing;

// Row tables for T tokens and P rows: distance d -> clamp(f(d) + P/2, 0, P-1), with f the
// identity, or (log_like) a non-linear step beyond |d| > 2 as DeBERTa's log buckets are, or
// (spread) 3d: rows skipped, as log buckets do when max_relative_positions is below the bucket
// count (the rows reached then outnumber the distances).
std::vector<std::int32_t> rows_table(int T, int P, bool log_like, bool spread = false) {
  std::vector<std::int32_t> t(2 * T - 1);
  for (int d = -(T - 1); d <= T - 1; ++d) {
    int f = spread ? 3 * d : d;
    if (log_like && (d > 2 || d < -2)) f = (d > 0 ? 1 : -1) * (2 + (std::abs(d) - 1) / 2);
    t[d + T - 1] = std::clamp(f + P / 2, 0, P - 1);
  }
  return t;
}

struct Case {
  AttentionShape s;
  int P;
  bool c2p, p2c, log_like;
  float p;
  bool spread = false;
};

void check_relative(const Case& c, const std::vector<std::int32_t>& mask) {
  const AttentionShape s = c.s;
  SCOPED_TRACE(::testing::Message() << "B=" << s.B << " T=" << s.T << " C=" << s.C << " H=" << s.H
                                    << " P=" << c.P << " c2p=" << c.c2p << " p2c=" << c.p2c
                                    << " p=" << c.p << " max_queries=" << s.max_queries);
  const std::uint64_t key = dropout_key(99, 3, 0, 1, 0);
  const std::size_t n_qkv = static_cast<std::size_t>(s.B) * s.T * 3 * s.C;
  const std::size_t n_out = static_cast<std::size_t>(s.B) * s.T * s.C;
  const std::size_t n_probs = static_cast<std::size_t>(s.B) * s.H * s.T * s.T;
  const std::int64_t ld = 2 * s.C;  // pq | pk side by side, as the model lays them out
  const std::size_t n_pos = static_cast<std::size_t>(c.P) * ld;
  Rng rng(s.T * 31 + c.P);
  const std::vector<float> qkvf = random_floats(rng, n_qkv, -1, 1);
  const std::vector<float> posf = random_floats(rng, n_pos, -1, 1);
  const std::vector<float> gf = random_floats(rng, n_out, -1, 1);
  const std::vector<std::int32_t> c2p = rows_table(s.T, c.P, c.log_like, c.spread);
  std::vector<std::int32_t> p2c = rows_table(s.T, c.P, c.log_like, c.spread);
  // p2c's table independent of c2p's (the kernel must not assume they are equal).
  for (auto& r : p2c) r = std::max(0, r - 1);
  const double scale = 1.0 / std::sqrt((s.C / s.H) * (1.0 + c.c2p + c.p2c));

  std::vector<double> qkv = as_double(qkvf), pos = as_double(posf), out(n_out), probs(n_probs);
  const std::vector<double> dout = as_double(gf);
  ref::RelativeRef rr{
      pos.data(), pos.data() + s.C, ld, c.c2p ? c2p.data() : nullptr, c.p2c ? p2c.data() : nullptr,
      scale};
  // The reference has no max_queries: it computes every row; compare those rows only.
  AttentionShape full = s;
  full.max_queries = 0;
  auto loss = [&] {
    ref::attention_forward(out.data(), probs.data(), qkv.data(), mask.data(), full, c.p, key, &rr);
    return weighted_sum(dout, out);
  };
  loss();
  std::vector<double> dqkv(n_qkv, 0.0), dpos(n_pos, 0.0);
  ref::attention_backward(dqkv.data(), dout.data(), qkv.data(), probs.data(), full, c.p, key, &rr,
                          dpos.data(), dpos.data() + s.C);
  if (s.max_queries == 0) {
    EXPECT_TRUE(gradients_match(dqkv, numeric_gradient(qkv, loss)));
    EXPECT_TRUE(gradients_match(dpos, numeric_gradient(pos, loss)));
  }

  // The fast kernels, fp32 and bf16 QKV (against the reference on the rounded values).
  for (const bool bf16 : {false, true}) {
    SCOPED_TRACE(bf16 ? "bf16 qkv" : "fp32 qkv");
    std::vector<float> q32 = qkvf;
    std::vector<std::uint16_t> q16(n_qkv);
    if (bf16) {
      for (std::size_t i = 0; i < n_qkv; ++i) {
        q16[i] = f32_to_bf16(qkvf[i]);
        q32[i] = bf16_to_f32(q16[i]);
      }
    }
    // The reference at these q, k, v, with the fast kernel's max_queries.
    std::vector<double> qd = as_double(q32), dgo = dout;
    if (s.max_queries > 0) {  // rows past max_queries get no gradient in the fast kernel
      for (int b = 0; b < s.B; ++b) {
        for (int t = s.max_queries; t < s.T; ++t) {
          std::fill_n(dgo.begin() + (static_cast<std::size_t>(b) * s.T + t) * s.C, s.C, 0.0);
        }
      }
    }
    std::vector<double> rout(n_out), rprobs(n_probs), rdqkv(n_qkv, 0.0), rdpos(n_pos, 0.0);
    ref::attention_forward(rout.data(), rprobs.data(), qd.data(), mask.data(), full, c.p, key, &rr);
    ref::attention_backward(rdqkv.data(), dgo.data(), qd.data(), rprobs.data(), full, c.p, key, &rr,
                            rdpos.data(), rdpos.data() + s.C);

    const RelativeScores rel{posf.data(),
                             posf.data() + s.C,
                             ld,
                             c.P,
                             c.c2p ? c2p.data() : nullptr,
                             c.p2c ? p2c.data() : nullptr,
                             static_cast<float>(scale)};
    std::vector<float> outf(n_out, 0.0f), probsf(n_probs, 0.0f), dqkvf(n_qkv, 7.0f),
        dposf(n_pos, 0.0f);
    if (bf16) {
      attention_forward(outf.data(), probsf.data(), q16.data(), mask.data(), s, c.p, key, rel);
      attention_backward(dqkvf.data(), gf.data(), q16.data(), probsf.data(), mask.data(), s, c.p,
                         key, rel, dposf.data(), dposf.data() + s.C);
    } else {
      attention_forward(outf.data(), probsf.data(), q32.data(), mask.data(), s, c.p, key, rel);
      attention_backward(dqkvf.data(), gf.data(), q32.data(), probsf.data(), mask.data(), s, c.p,
                         key, rel, dposf.data(), dposf.data() + s.C);
    }
    // Longest float reductions: T keys times a length-D dot product, three score terms.
    const double length = s.T + 6.0 * s.C / s.H;
    if (s.max_queries == 0) {
      EXPECT_TRUE(fast_matches_reference(outf.data(), rout, length));
    } else {
      for (int b = 0; b < s.B; ++b) {
        for (int t = 0; t < s.max_queries; ++t) {
          const std::size_t at = (static_cast<std::size_t>(b) * s.T + t) * s.C;
          const std::vector<double> row(rout.begin() + at, rout.begin() + at + s.C);
          EXPECT_TRUE(fast_matches_reference(outf.data() + at, row, length));
        }
      }
    }
    EXPECT_TRUE(fast_matches_reference(dqkvf.data(), rdqkv, length));
    EXPECT_TRUE(fast_matches_reference(dposf.data(), rdpos, length * s.B));
  }
}

TEST(GradCheck, RelativeAttentionC2pAndP2c) {
  const std::vector<std::int32_t> mask = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0};
  check_relative({{2, 6, 8, 2}, 8, true, true, false, 0.0f}, mask);
  check_relative({{2, 6, 8, 2}, 8, true, true, false, 0.2f}, mask);
}

TEST(GradCheck, RelativeAttentionOneKindEach) {
  const std::vector<std::int32_t> mask = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0};
  check_relative({{2, 7, 12, 3}, 6, true, false, true, 0.0f}, mask);
  check_relative({{2, 7, 12, 3}, 6, false, true, true, 0.1f}, mask);
}

TEST(GradCheck, RelativeAttentionClampedRowsAndLogSteps) {
  // P = 4 rows for distances up to ±8: most distances clamp to the first or last row.
  const std::vector<std::int32_t> mask(2 * 9, 1);
  check_relative({{2, 9, 8, 2}, 4, true, true, true, 0.0f}, mask);
  // Many rows, few reached (P = 40 for T = 9).
  check_relative({{2, 9, 8, 2}, 40, true, true, true, 0.0f}, mask);
  // Rows skipped: distances up to ±8 reach rows 20 ± 24 of 40 (more rows than distances).
  check_relative({{2, 9, 8, 2}, 40, true, true, false, 0.0f, /*spread=*/true}, mask);
}

TEST(GradCheck, RelativeAttentionFirstQueryOnlyAndUnpadded) {
  const std::vector<std::int32_t> mask = {1, 1, 1, 1, 1, 0, 1, 1, 1, 0, 0, 0};
  AttentionShape s{2, 6, 8, 2};
  s.max_queries = 1;
  check_relative({s, 8, true, true, false, 0.0f}, mask);
}

TEST(GradCheck, RelativeAttentionPaddingQueriesAttendNothing) {
  // DeBERTa's XSoftmax: sequence 0's two padding queries get zero rows (and no gradient).
  const std::vector<std::int32_t> mask = {1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1};
  AttentionShape s{2, 6, 8, 2};
  s.query_mask = true;
  check_relative({s, 8, true, true, false, 0.0f}, mask);
  check_relative({s, 8, true, true, false, 0.1f}, mask);
}

}  // namespace
}  // namespace bertfit
