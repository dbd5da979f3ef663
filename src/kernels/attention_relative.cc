// DeBERTa's disentangled attention (see attention_relative.h). Per (sequence, head): the content
// scores as in attention.cc, then the c2p scores as one product of the scaled queries with the
// rows of pk the sequence's distances reach (Q × R, R <= min(P, Q+K-1)), gathered into S by
// distance, and the p2c scores likewise from the keys and pq. The backward scatters dS back by
// distance (dC2P, dP2C) and runs the transposed products; each task is one head, its sequences
// in turn, so that the head's channels of d_pos_* have one writer. bf16 q, k, v are widened to
// fp32 per head (the products stay fp32: the relative scores are a small part of the step).
#include "kernels/attention_relative.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "base/parallel.h"
#include "kernels/attention_internal.h"
#include "kernels/cast.h"
#include "kernels/small_gemm.h"

namespace bertfit {
namespace {

using detail::Dropout;
using detail::grow;
using detail::round_up16;

// One (sequence, head) task's rows: q, k, v with row stride ld (in place in fp32 QKV, or the
// widened copies), and the bounds attention.cc's Head has.
struct RelHead {
  int T, D;
  const std::int32_t* mask;  // (T) of sequence b
  int kend, qend;
  bool any_real;
  bool query_mask;  // AttentionShape::query_mask
  const float *q, *k, *v;
  std::ptrdiff_t ld;
  std::int64_t channel;  // h · D: this head's columns of pos_* and d_pos_*
};

struct RelScratch {
  std::vector<float> qs;           // (T, D) q · s
  std::vector<float> kt;           // (D, Kp) kᵀ (forward) or vᵀ (backward)
  std::vector<float> s;            // (T, Kp) scores, then dP and dS
  std::vector<float> pd;           // (T, Kp) dropped probabilities
  std::vector<std::uint8_t> keep;  // (T, Kp)
  std::vector<float> relt;         // (D, Rp) rows [r0, r1] of pk or pq, transposed
  std::vector<float> rel;          // (T, Rp) C2P or P2C (forward), dC2P or dP2C (backward)
  std::vector<float> wide;         // (T, 3D) bf16 q | k | v widened
  void ensure(int T, int D, int R) {
    const std::size_t Kp = round_up16(T), Rp = round_up16(R);
    grow(qs, static_cast<std::size_t>(T) * D);
    grow(kt, static_cast<std::size_t>(D) * Kp);
    grow(s, T * Kp);
    grow(pd, T * Kp);
    grow(keep, T * Kp);
    grow(relt, D * Rp);
    grow(rel, T * Rp);
    grow(wide, static_cast<std::size_t>(T) * 3 * D);
  }
};

RelScratch* rel_scratch(int T, int D, int R) {
  thread_local RelScratch sc;
  sc.ensure(T, D, R);
  return &sc;
}

// The rows [r0, r1] of pk / pq that distances d in [-(K-1), Q-1] reach (the tables are
// non-decreasing in d, but the range is taken from every entry to rely on nothing).
struct RowRange {
  int r0, r1;
  int count() const { return r1 - r0 + 1; }
};
RowRange row_range(const RelativeScores& rel, int T, int Q, int K) {
  RowRange r{rel.P, -1};
  for (const std::int32_t* table : {rel.c2p_rows, rel.p2c_rows}) {
    if (table == nullptr) continue;
    for (int d = -(K - 1); d <= Q - 1; ++d) {
      const int row = table[d + T - 1];
      r.r0 = std::min(r.r0, row);
      r.r1 = std::max(r.r1, row);
    }
  }
  if (r.r1 < r.r0) r = {0, 0};
  return r;
}

// The most rows any task's range holds: that of every distance of T tokens. Not 2T-1: bucketed
// distances may skip rows (buckets wider than the distances they stand for when
// max_relative_positions is below the bucket count), so the range can exceed the distances.
int max_rows(const RelativeScores& rel, int T) { return row_range(rel, T, T, T).count(); }

// Per-head bounds as attention.cc's make_head: keys past the last real one skipped, queries
// past it when unpadded, at most max_queries.
template <class E>
RelHead make_rel_head(const AttentionShape& s, const E* qkv, const std::int32_t* mask, int b, int h,
                      RelScratch& sc) {
  const int D = s.C / s.H, T = s.T;
  const std::int32_t* m = mask + static_cast<std::int64_t>(b) * T;
  int kend = T;
  while (kend > 0 && m[kend - 1] == 0) --kend;
  const bool any_real = kend > 0;
  if (!any_real) kend = T;
  int qend = s.skip_padding_queries ? kend : T;
  if (s.max_queries > 0) qend = std::min(qend, s.max_queries);
  const std::int64_t channel = static_cast<std::int64_t>(h) * D;
  const E* src = qkv + static_cast<std::int64_t>(b) * T * 3 * s.C + channel;
  if constexpr (std::is_same_v<E, float>) {
    return {T,       D,      m, kend, qend, any_real, s.query_mask, src, src + s.C, src + 2 * s.C,
            3 * s.C, channel};
  } else {
    // Widen this head's q, k, v rows into (T, 3D): q at 0, k at D, v at 2D.
    float* w = sc.wide.data();
    for (int t = 0; t < T; ++t) {
      for (int part = 0; part < 3; ++part) {
        const E* from = src + static_cast<std::int64_t>(t) * 3 * s.C + part * s.C;
        float* to = w + static_cast<std::size_t>(t) * 3 * D + part * D;
        for (int d = 0; d < D; ++d) to[d] = bf16_to_f32(from[d]);
      }
    }
    return {T, D, m, kend, qend, any_real, s.query_mask, w, w + D, w + 2 * D, 3 * D, channel};
  }
}

void scaled_queries(const RelHead& hd, float scale, RelScratch& sc) {
  for (int i = 0; i < hd.qend; ++i) {
    const float* qi = hd.q + i * hd.ld;
    float* o = sc.qs.data() + static_cast<std::size_t>(i) * hd.D;
    for (int d = 0; d < hd.D; ++d) o[d] = qi[d] * scale;
  }
}

// dst (D, ldt) = rows [0, n) of x (stride ld, D columns) transposed; columns [n, ldt) zero.
void transpose_rows(float* dst, int ldt, const float* x, std::ptrdiff_t ld, int n, int D) {
  for (int j = 0; j < n; ++j) {
    for (int d = 0; d < D; ++d) dst[static_cast<std::size_t>(d) * ldt + j] = x[j * ld + d];
  }
  for (int d = 0; d < D; ++d)
    std::fill_n(dst + static_cast<std::size_t>(d) * ldt + n, ldt - n, 0.f);
}

void head_forward(float* out, std::int64_t out_ld, float* probs, const RelHead& hd,
                  const Dropout& drop, const RelativeScores& rel, RelScratch& sc) {
  const int T = hd.T, D = hd.D, K = hd.kend, Q = hd.qend, Kp = round_up16(K);
  const RowRange rr = row_range(rel, T, Q, K);
  const int R = rr.count(), Rp = round_up16(R);
  scaled_queries(hd, rel.scale, sc);
  transpose_rows(sc.kt.data(), Kp, hd.k, hd.ld, K, D);
  // S (Q, Kp) = (q · s) · kᵀ
  detail::small_gemm(Q, Kp, D, 1.0f, sc.qs.data(), D, 1, sc.kt.data(), Kp, sc.s.data(), Kp, false);
  float* rs = sc.rel.data();
  if (rel.c2p_rows != nullptr) {
    // C2P (Q, R) = (q · s) · pk[r0..r1]ᵀ;  S_ij += C2P[i, c(i-j) - r0]
    transpose_rows(sc.relt.data(), Rp, rel.pos_key + rr.r0 * rel.ld + hd.channel, rel.ld, R, D);
    detail::small_gemm(Q, Rp, D, 1.0f, sc.qs.data(), D, 1, sc.relt.data(), Rp, rs, Rp, false);
    for (int i = 0; i < Q; ++i) {
      float* si = sc.s.data() + static_cast<std::size_t>(i) * Kp;
      const float* ci = rs + static_cast<std::size_t>(i) * Rp;
      const std::int32_t* rows = rel.c2p_rows + i + T - 1;  // rows[-j]: distance i - j
      for (int j = 0; j < K; ++j) si[j] += ci[rows[-j] - rr.r0];
    }
  }
  if (rel.p2c_rows != nullptr) {
    // P2C (K, R) = s · k · pq[r0..r1]ᵀ;  S_ij += P2C[j, p(i-j) - r0]
    transpose_rows(sc.relt.data(), Rp, rel.pos_query + rr.r0 * rel.ld + hd.channel, rel.ld, R, D);
    detail::small_gemm(K, Rp, D, rel.scale, hd.k, hd.ld, 1, sc.relt.data(), Rp, rs, Rp, false);
    for (int i = 0; i < Q; ++i) {
      float* si = sc.s.data() + static_cast<std::size_t>(i) * Kp;
      const std::int32_t* rows = rel.p2c_rows + i + T - 1;
      for (int j = 0; j < K; ++j) si[j] += rs[static_cast<std::size_t>(j) * Rp + rows[-j] - rr.r0];
    }
  }
  for (int i = 0; i < Q; ++i) {
    float* pi = probs + static_cast<std::int64_t>(i) * T;
    if (hd.query_mask && hd.mask[i] == 0) {  // a padding query attends to nothing
      std::fill(pi, pi + T, 0.0f);
      continue;
    }
    detail::masked_softmax(pi, sc.s.data() + static_cast<std::size_t>(i) * Kp, hd.mask, K,
                           hd.any_real);
    std::fill(pi + K, pi + T, 0.0f);
  }
  // out (Q, D) = dropout(P) · v
  const auto [p, ldp] = detail::dropped_probs(probs, hd, drop, Kp, sc);
  detail::small_gemm(Q, D, K, 1.0f, p, ldp, 1, hd.v, hd.ld, out + hd.channel, out_ld, false);
}

void zero_rows(float* c, std::ptrdiff_t row, int from, int T, int D) {
  for (int i = from; i < T; ++i) std::fill_n(c + i * row, D, 0.0f);
}

// dq: row 0 of this sequence's dqkv at the head's q channels (k at +C, v at +2C; rows 3C apart).
void head_backward(float* dq, std::int64_t C, const float* dout, const float* probs,
                   const RelHead& hd, const Dropout& drop, const RelativeScores& rel,
                   float* d_pos_query, float* d_pos_key, RelScratch& sc) {
  const int T = hd.T, D = hd.D, K = hd.kend, Q = hd.qend, Kp = round_up16(K);
  const std::ptrdiff_t row = 3 * C;
  float *dk = dq + C, *dv = dq + 2 * C;
  const float* dO = dout + hd.channel;
  const RowRange rr = row_range(rel, T, Q, K);
  const int R = rr.count(), Rp = round_up16(R);
  scaled_queries(hd, rel.scale, sc);
  transpose_rows(sc.kt.data(), Kp, hd.v, hd.ld, K, D);
  const auto [p, ldp] = detail::dropped_probs(probs, hd, drop, Kp, sc);
  // dV (K, D) = dropout(P)ᵀ · dO
  detail::small_gemm(K, D, Q, 1.0f, p, 1, ldp, dO, C, dv, row, false);
  // dP_drop (Q, Kp) = dO · vᵀ, then dS in place
  float* ds = sc.s.data();
  detail::small_gemm(Q, Kp, D, 1.0f, dO, C, 1, sc.kt.data(), Kp, ds, Kp, false);
  detail::softmax_backward_rows(ds, Kp, probs, hd, drop, sc.keep.data());
  // dQ (Q, D) = s · dS · k;  dK (K, D) = dSᵀ · (q · s)
  detail::small_gemm(Q, D, K, rel.scale, ds, Kp, 1, hd.k, hd.ld, dq, row, false);
  detail::small_gemm(K, D, Q, 1.0f, ds, 1, Kp, sc.qs.data(), D, dk, row, false);
  float* drs = sc.rel.data();
  if (rel.c2p_rows != nullptr) {
    // dC2P (Q, R): dS scattered by c(i-j); dQ += s · dC2P · pk;  d_pk += dC2Pᵀ · (q · s)
    std::fill_n(drs, static_cast<std::size_t>(Q) * Rp, 0.0f);
    for (int i = 0; i < Q; ++i) {
      const float* dsi = ds + static_cast<std::size_t>(i) * Kp;
      float* di = drs + static_cast<std::size_t>(i) * Rp;
      const std::int32_t* rows = rel.c2p_rows + i + T - 1;
      for (int j = 0; j < K; ++j) di[rows[-j] - rr.r0] += dsi[j];
    }
    const float* pk = rel.pos_key + rr.r0 * rel.ld + hd.channel;
    detail::small_gemm(Q, D, R, rel.scale, drs, Rp, 1, pk, rel.ld, dq, row, true);
    detail::small_gemm(R, D, Q, 1.0f, drs, 1, Rp, sc.qs.data(), D,
                       d_pos_key + rr.r0 * rel.ld + hd.channel, rel.ld, true);
  }
  if (rel.p2c_rows != nullptr) {
    // dP2C (K, R): dSᵀ scattered by p(i-j); dK += s · dP2C · pq;  d_pq += s · dP2Cᵀ · k
    std::fill_n(drs, static_cast<std::size_t>(K) * Rp, 0.0f);
    for (int i = 0; i < Q; ++i) {
      const float* dsi = ds + static_cast<std::size_t>(i) * Kp;
      const std::int32_t* rows = rel.p2c_rows + i + T - 1;
      for (int j = 0; j < K; ++j)
        drs[static_cast<std::size_t>(j) * Rp + rows[-j] - rr.r0] += dsi[j];
    }
    const float* pq = rel.pos_query + rr.r0 * rel.ld + hd.channel;
    detail::small_gemm(K, D, R, rel.scale, drs, Rp, 1, pq, rel.ld, dk, row, true);
    detail::small_gemm(R, D, K, rel.scale, drs, 1, Rp, hd.k, hd.ld,
                       d_pos_query + rr.r0 * rel.ld + hd.channel, rel.ld, true);
  }
  zero_rows(dq, row, Q, T, D);
  zero_rows(dk, row, K, T, D);
  zero_rows(dv, row, K, T, D);
}

void check_relative(const AttentionShape& s, const std::int32_t* mask, const RelativeScores& rel) {
  CHECK(s.window < 0, "the disentangled attention has no window");
  CHECK(s.B >= 0 && s.T > 0 && s.H > 0 && s.C > 0 && s.C % s.H == 0 && s.max_queries >= 0, "B ",
        s.B, " T ", s.T, " C ", s.C, " H ", s.H);
  CHECK(mask != nullptr, "attention needs a key mask");
  CHECK(rel.P > 0 && rel.ld >= s.C && rel.scale > 0.0f, "relative scores: P ", rel.P, " ld ",
        rel.ld);
  CHECK(rel.c2p_rows == nullptr || rel.pos_key != nullptr, "c2p without pos_key");
  CHECK(rel.p2c_rows == nullptr || rel.pos_query != nullptr, "p2c without pos_query");
}

template <class E>
void forward_impl(float* out, float* probs, const E* qkv, const std::int32_t* mask,
                  AttentionShape s, float p, std::uint64_t key, const RelativeScores& rel) {
  check_relative(s, mask, rel);
  const int D = s.C / s.H;
  const Dropout drop0 = detail::make_dropout(p, key);
  const int R = max_rows(rel, s.T);
  parallel_tasks(
      static_cast<std::int64_t>(s.B) * s.H, [&] { return rel_scratch(s.T, D, R); },
      [&](std::int64_t task, RelScratch* sc) {
        const int b = static_cast<int>(task / s.H), h = static_cast<int>(task % s.H);
        Dropout drop = drop0;
        drop.base = static_cast<std::uint64_t>(task) * s.T * s.T;
        const RelHead hd = make_rel_head(s, qkv, mask, b, h, *sc);
        head_forward(out + static_cast<std::int64_t>(b) * s.T * s.C, s.C, probs + task * s.T * s.T,
                     hd, drop, rel, *sc);
      });
}

template <class E>
void backward_impl(float* dqkv, const float* dout, const E* qkv, const float* probs,
                   const std::int32_t* mask, AttentionShape s, float p, std::uint64_t key,
                   const RelativeScores& rel, float* d_pos_query, float* d_pos_key) {
  check_relative(s, mask, rel);
  CHECK((rel.c2p_rows == nullptr || d_pos_key != nullptr) &&
            (rel.p2c_rows == nullptr || d_pos_query != nullptr),
        "relative attention backward without the projections' gradients");
  const int D = s.C / s.H;
  const Dropout drop0 = detail::make_dropout(p, key);
  const int R = max_rows(rel, s.T);
  parallel_tasks(
      s.H, [&] { return rel_scratch(s.T, D, R); },
      [&](std::int64_t h, RelScratch* sc) {
        for (int b = 0; b < s.B; ++b) {
          const std::int64_t task = static_cast<std::int64_t>(b) * s.H + h;
          Dropout drop = drop0;
          drop.base = static_cast<std::uint64_t>(task) * s.T * s.T;
          const RelHead hd = make_rel_head(s, qkv, mask, b, static_cast<int>(h), *sc);
          const std::int64_t seq = static_cast<std::int64_t>(b) * s.T;
          head_backward(dqkv + seq * 3 * s.C + hd.channel, s.C, dout + seq * s.C,
                        probs + task * s.T * s.T, hd, drop, rel, d_pos_query, d_pos_key, *sc);
        }
      });
}

}  // namespace

void attention_forward(float* out, float* probs, const float* qkv, const std::int32_t* mask,
                       AttentionShape s, float p, std::uint64_t key, const RelativeScores& rel) {
  forward_impl(out, probs, qkv, mask, s, p, key, rel);
}

void attention_forward(float* out, float* probs, const std::uint16_t* qkv, const std::int32_t* mask,
                       AttentionShape s, float p, std::uint64_t key, const RelativeScores& rel) {
  forward_impl(out, probs, qkv, mask, s, p, key, rel);
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* probs,
                        const std::int32_t* mask, AttentionShape s, float p, std::uint64_t key,
                        const RelativeScores& rel, float* d_pos_query, float* d_pos_key) {
  backward_impl(dqkv, dout, qkv, probs, mask, s, p, key, rel, d_pos_query, d_pos_key);
}

void attention_backward(float* dqkv, const float* dout, const std::uint16_t* qkv,
                        const float* probs, const std::int32_t* mask, AttentionShape s, float p,
                        std::uint64_t key, const RelativeScores& rel, float* d_pos_query,
                        float* d_pos_key) {
  backward_impl(dqkv, dout, qkv, probs, mask, s, p, key, rel, d_pos_query, d_pos_key);
}

}  // namespace bertfit
