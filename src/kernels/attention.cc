// Multi-head attention forward/backward on a fused QKV buffer, one (batch, head) pair per
// task. Inner loops run over contiguous keys (scores against a transposed K or V copy) or
// contiguous channels of a head (axpy into outputs), so they vectorise without reductions.
// Dropout on the probabilities uses the counter-based mask of dropout.h.
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "base/check.h"
#include "base/parallel.h"
#include "kernels/dropout_internal.h"
#include "kernels/vmath.h"

namespace bertfit {
namespace {

// Addresses one (b, h) task's slices of a (T, 3C) sequence block: q, k, v rows of head h.
struct Head {
  int T, C, D;
  const float* qkv;          // first row of sequence b
  const std::int32_t* mask;  // (T) of sequence b
  std::int64_t channel;      // h · D
  int kend;                  // keys [kend, T) are padding (probability 0): skipped
  int qend;                  // query rows computed: [0, qend)
  bool any_real;             // some key is real (else HF's rows are uniform over all T)
  std::int64_t row() const { return 3 * static_cast<std::int64_t>(C); }
  const float* q(int i) const { return qkv + i * row() + channel; }
  const float* k(int j) const { return qkv + j * row() + C + channel; }
  const float* v(int j) const { return qkv + j * row() + 2 * C + channel; }
};

struct Dropout {
  bool active;
  std::uint32_t threshold;
  float scale;
  std::uint64_t key;
  // Index of element (i, 0) of this head's (T,T) block in the (B,H,T,T) mask.
  std::uint64_t base;
  bool keep(std::uint64_t i_row, int j) const {
    return !active || detail::random_bits(key, i_row + static_cast<std::uint64_t>(j)) >= threshold;
  }
};

// probs (T) = softmax of scores over the real keys; masked keys get exactly 0. With no real
// key HF's rows are all finfo.min, i.e. uniform 1/T.
void masked_softmax(float* probs, const float* scores, const std::int32_t* mask, int T,
                    bool any_real) {
  if (!any_real) {
    std::fill(probs, probs + T, 1.0f / static_cast<float>(T));
    return;
  }
  float mx = -std::numeric_limits<float>::infinity();
  for (int j = 0; j < T; ++j) {
    if (mask[j] != 0) mx = std::max(mx, scores[j]);
  }
  for (int j = 0; j < T; ++j) probs[j] = mask[j] != 0 ? detail::vexp(scores[j] - mx) : 0.0f;
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int j = 0; j < T; ++j) sum += probs[j];
  const float inv = static_cast<float>(1.0 / sum);
  for (int j = 0; j < T; ++j) probs[j] *= inv;
}

Dropout make_dropout(float p, std::uint64_t key) {
  Dropout d{p > 0.0f, detail::keep_threshold(p), 1.0f, key, 0};
  if (d.active) d.scale = detail::keep_scale(p);
  return d;
}

Head make_head(const AttentionShape& s, const float* qkv, const std::int32_t* mask, int b, int h) {
  const int D = s.C / s.H;
  const std::int32_t* m = mask + static_cast<std::int64_t>(b) * s.T;
  int kend = s.T;
  while (kend > 0 && m[kend - 1] == 0) --kend;
  const bool any_real = kend > 0;
  if (!any_real) kend = s.T;  // uniform rows over every key
  return Head{s.T,     s.C,
              D,       qkv + static_cast<std::int64_t>(b) * s.T * 3 * s.C,
              m,       static_cast<std::int64_t>(h) * D,
              kend,    s.skip_padding_queries ? kend : s.T,
              any_real};
}

void head_forward(float* out, float* probs, const Head& hd, Dropout drop, float sqrt_d,
                  std::vector<float>& kt, std::vector<float>& q, std::vector<float>& s,
                  std::vector<float>& o) {
  const int T = hd.T, D = hd.D, K = hd.kend;
  for (int j = 0; j < K; ++j) {
    const float* kj = hd.k(j);
    for (int d = 0; d < D; ++d) kt[static_cast<std::size_t>(d) * T + j] = kj[d];
  }
  for (int i = 0; i < hd.qend; ++i) {
    const float* qi = hd.q(i);
    for (int d = 0; d < D; ++d) q[d] = qi[d] / sqrt_d;  // HF: q = q / math.sqrt(D)
    std::fill(s.begin(), s.begin() + K, 0.0f);
    for (int d = 0; d < D; ++d) {
      const float qd = q[d];
      const float* kd = kt.data() + static_cast<std::size_t>(d) * T;
      for (int j = 0; j < K; ++j) s[j] += qd * kd[j];
    }
    float* pi = probs + static_cast<std::int64_t>(i) * T;
    masked_softmax(pi, s.data(), hd.mask, K, hd.any_real);
    std::fill(pi + K, pi + T, 0.0f);
    std::fill(o.begin(), o.end(), 0.0f);
    const std::uint64_t i_row = drop.base + static_cast<std::uint64_t>(i) * T;
    for (int j = 0; j < K; ++j) {
      const float pd = drop.keep(i_row, j) ? pi[j] * drop.scale : 0.0f;
      if (pd == 0.0f) continue;
      const float* vj = hd.v(j);
      for (int d = 0; d < D; ++d) o[d] += pd * vj[d];
    }
    float* oi = out + static_cast<std::int64_t>(i) * hd.C + hd.channel;
    std::copy(o.begin(), o.end(), oi);
  }
}

struct BackwardScratch {
  std::vector<float> vt, dk, dv, q, dq, dp, ds;
  BackwardScratch(int T, int D)
      : vt(static_cast<std::size_t>(D) * T),
        dk(static_cast<std::size_t>(T) * D),
        dv(static_cast<std::size_t>(T) * D),
        q(D),
        dq(D),
        dp(T),
        ds(T) {}
};

// dqkv, dout: the first row of sequence b; probs: this head's (T,T) block.
void head_backward(float* dqkv, const float* dout, const float* probs, const Head& hd, Dropout drop,
                   float sqrt_d, BackwardScratch& sc) {
  const int T = hd.T, D = hd.D, K = hd.kend;
  for (int j = 0; j < K; ++j) {
    const float* vj = hd.v(j);
    for (int d = 0; d < D; ++d) sc.vt[static_cast<std::size_t>(d) * T + j] = vj[d];
  }
  std::fill(sc.dk.begin(), sc.dk.begin() + static_cast<std::ptrdiff_t>(K) * D, 0.0f);
  std::fill(sc.dv.begin(), sc.dv.begin() + static_cast<std::ptrdiff_t>(K) * D, 0.0f);
  for (int i = 0; i < hd.qend; ++i) {
    const float* pi = probs + static_cast<std::int64_t>(i) * T;
    const float* doi = dout + static_cast<std::int64_t>(i) * hd.C + hd.channel;
    // dP_drop[j] = dO_i · v_j
    float* dp = sc.dp.data();
    std::fill(sc.dp.begin(), sc.dp.begin() + K, 0.0f);
    for (int d = 0; d < D; ++d) {
      const float g = doi[d];
      const float* vd = sc.vt.data() + static_cast<std::size_t>(d) * T;
      for (int j = 0; j < K; ++j) dp[j] += g * vd[j];
    }
    // dV_j += P_drop[i][j] · dO_i;  dP = dP_drop ⊙ keep / (1-p);  r = Σ_j dP_j P_j
    const std::uint64_t i_row = drop.base + static_cast<std::uint64_t>(i) * T;
    double r = 0.0;
    for (int j = 0; j < K; ++j) {
      const bool keep = drop.keep(i_row, j);
      const float pd = keep ? pi[j] * drop.scale : 0.0f;
      if (pd != 0.0f) {
        float* dvj = sc.dv.data() + static_cast<std::size_t>(j) * D;
        for (int d = 0; d < D; ++d) dvj[d] += pd * doi[d];
      }
      dp[j] = keep ? dp[j] * drop.scale : 0.0f;
      r += static_cast<double>(dp[j]) * pi[j];
    }
    const float rf = static_cast<float>(r);
    for (int j = 0; j < K; ++j) sc.ds[j] = pi[j] * (dp[j] - rf);  // dS = P ⊙ (dP - r)
    // dQ_i += (dS_i · K) / √D;  dK_j += dS_ij · (q_i / √D)
    const float* qi = hd.q(i);
    for (int d = 0; d < D; ++d) sc.q[d] = qi[d] / sqrt_d;
    std::fill(sc.dq.begin(), sc.dq.end(), 0.0f);
    for (int j = 0; j < K; ++j) {
      const float dsj = sc.ds[j];
      if (dsj == 0.0f) continue;
      const float* kj = hd.k(j);
      float* dkj = sc.dk.data() + static_cast<std::size_t>(j) * D;
      for (int d = 0; d < D; ++d) {
        sc.dq[d] += dsj * kj[d];
        dkj[d] += dsj * sc.q[d];
      }
    }
    float* dqi = dqkv + i * hd.row() + hd.channel;
    for (int d = 0; d < D; ++d) dqi[d] += sc.dq[d] / sqrt_d;
  }
  for (int j = 0; j < K; ++j) {
    float* dkj = dqkv + j * hd.row() + hd.C + hd.channel;
    float* dvj = dkj + hd.C;
    const float* sk = sc.dk.data() + static_cast<std::size_t>(j) * D;
    const float* sv = sc.dv.data() + static_cast<std::size_t>(j) * D;
    for (int d = 0; d < D; ++d) {
      dkj[d] += sk[d];
      dvj[d] += sv[d];
    }
  }
}

void check_shape(const AttentionShape& s) {
  CHECK(s.B >= 0 && s.T > 0 && s.H > 0 && s.C > 0 && s.C % s.H == 0, "B ", s.B, " T ", s.T, " C ",
        s.C, " H ", s.H);
}

}  // namespace

void attention_forward(float* out, float* probs, const float* qkv, const std::int32_t* mask,
                       AttentionShape s, float p, std::uint64_t key) {
  check_shape(s);
  CHECK(mask != nullptr, "attention needs a key mask");
  const int D = s.C / s.H;
  const float sqrt_d = static_cast<float>(std::sqrt(static_cast<double>(D)));
  const Dropout drop0 = make_dropout(p, key);
  parallel_for(static_cast<std::int64_t>(s.B) * s.H, 1, [&](std::int64_t t0, std::int64_t t1) {
    std::vector<float> kt(static_cast<std::size_t>(D) * s.T), q(D), sc(s.T), o(D);
    for (std::int64_t task = t0; task < t1; ++task) {
      const int b = static_cast<int>(task / s.H), h = static_cast<int>(task % s.H);
      const Head hd = make_head(s, qkv, mask, b, h);
      Dropout drop = drop0;
      drop.base = static_cast<std::uint64_t>(task) * s.T * s.T;
      head_forward(out + static_cast<std::int64_t>(b) * s.T * s.C,
                   probs + static_cast<std::int64_t>(task) * s.T * s.T, hd, drop, sqrt_d, kt, q, sc,
                   o);
    }
  });
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* probs,
                        const std::int32_t* mask, AttentionShape s, float p, std::uint64_t key) {
  check_shape(s);
  CHECK(mask != nullptr, "attention needs a key mask");
  const int D = s.C / s.H;
  const float sqrt_d = static_cast<float>(std::sqrt(static_cast<double>(D)));
  const Dropout drop0 = make_dropout(p, key);
  parallel_for(static_cast<std::int64_t>(s.B) * s.H, 1, [&](std::int64_t t0, std::int64_t t1) {
    BackwardScratch sc(s.T, D);
    for (std::int64_t task = t0; task < t1; ++task) {
      const int b = static_cast<int>(task / s.H), h = static_cast<int>(task % s.H);
      const Head hd = make_head(s, qkv, mask, b, h);
      Dropout drop = drop0;
      drop.base = static_cast<std::uint64_t>(task) * s.T * s.T;
      const std::int64_t seq = static_cast<std::int64_t>(b) * s.T;
      head_backward(dqkv + seq * 3 * s.C, dout + seq * s.C,
                    probs + static_cast<std::int64_t>(task) * s.T * s.T, hd, drop, sqrt_d, sc);
    }
  });
}

}  // namespace bertfit
