// Scalar double-precision reference of multi-head attention with a key mask and dropout on
// the probabilities (HF semantics; see kernels/attention.h), written as the textbook loops.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/dropout.h"
#include "kernels/ref/ref.h"

namespace bertfit::ref {
namespace {

// Offsets into qkv (B,T,3C) of q, k, v for token t of sequence b, head h, channel d.
struct Index {
  AttentionShape s;
  int D() const { return s.C / s.H; }
  std::int64_t token(int b, int t) const { return (static_cast<std::int64_t>(b) * s.T + t); }
  std::int64_t q(int b, int t, int h, int d) const { return token(b, t) * 3 * s.C + h * D() + d; }
  std::int64_t k(int b, int t, int h, int d) const { return q(b, t, h, d) + s.C; }
  std::int64_t v(int b, int t, int h, int d) const { return q(b, t, h, d) + 2 * s.C; }
  std::int64_t out(int b, int t, int h, int d) const { return token(b, t) * s.C + h * D() + d; }
  std::int64_t prob(int b, int h, int i, int j) const {
    return ((static_cast<std::int64_t>(b) * s.H + h) * s.T + i) * s.T + j;
  }
};

// The probability after dropout: P / (1-p) where kept, 0 where dropped.
double dropped(double prob, const Index& ix, int b, int h, int i, int j, float p,
               std::uint64_t key) {
  if (p == 0.0f) return prob;
  const bool keep = dropout_keep(key, static_cast<std::uint64_t>(ix.prob(b, h, i, j)), p);
  return keep ? prob / (1.0 - p) : 0.0;
}

}  // namespace

void attention_forward(double* out, double* probs, const double* qkv, const std::int32_t* mask,
                       AttentionShape s, float p, std::uint64_t key, const RelativeRef* rel) {
  const Index ix{s};
  const int T = s.T, D = ix.D();
  const double sqrt_d = std::sqrt(static_cast<double>(D));
  std::vector<double> score(T);
  for (int b = 0; b < s.B; ++b) {
    bool any_real = false;
    for (int j = 0; j < T; ++j) any_real = any_real || mask[b * T + j] != 0;
    for (int h = 0; h < s.H; ++h) {
      for (int i = 0; i < T; ++i) {
        // The keys row i sees: the real ones, within the window when it has one and some real
        // key lies inside it (else every real key, as the fast kernels).
        bool in_window = false;
        for (int j = 0; j < T; ++j) {
          in_window = in_window || (mask[b * T + j] != 0 && std::abs(i - j) <= s.window);
        }
        auto seen = [&](int j) {
          return mask[b * T + j] != 0 &&
                 (s.window < 0 || !in_window || std::abs(i - j) <= s.window);
        };
        // score_j = (q_i / √D) · k_j over the keys seen; softmax over them only.
        double mx = -INFINITY;
        for (int j = 0; j < T; ++j) {
          score[j] = 0.0;
          for (int d = 0; d < D; ++d) {
            if (rel == nullptr) {
              score[j] += qkv[ix.q(b, i, h, d)] / sqrt_d * qkv[ix.k(b, j, h, d)];
              continue;
            }
            double sc = qkv[ix.q(b, i, h, d)] * qkv[ix.k(b, j, h, d)];
            const std::int64_t col = h * D + d;
            if (rel->c2p_rows != nullptr) {
              sc += qkv[ix.q(b, i, h, d)] *
                    rel->pos_key[rel->c2p_rows[i - j + T - 1] * rel->ld + col];
            }
            if (rel->p2c_rows != nullptr) {
              sc += qkv[ix.k(b, j, h, d)] *
                    rel->pos_query[rel->p2c_rows[i - j + T - 1] * rel->ld + col];
            }
            score[j] += sc * rel->scale;
          }
          if (seen(j)) mx = std::max(mx, score[j]);
        }
        double sum = 0.0;
        for (int j = 0; j < T; ++j) sum += seen(j) ? std::exp(score[j] - mx) : 0.0;
        for (int j = 0; j < T; ++j) {
          double prob = 1.0 / T;  // no real key: HF's all-finfo.min row is uniform
          if (any_real) prob = seen(j) ? std::exp(score[j] - mx) / sum : 0.0;
          if (s.query_mask && mask[b * T + i] == 0) prob = 0.0;  // DeBERTa's XSoftmax
          probs[ix.prob(b, h, i, j)] = prob;
        }
        // out_i = Σ_j dropout(P_ij) · v_j
        for (int d = 0; d < D; ++d) {
          double o = 0.0;
          for (int j = 0; j < T; ++j) {
            o +=
                dropped(probs[ix.prob(b, h, i, j)], ix, b, h, i, j, p, key) * qkv[ix.v(b, j, h, d)];
          }
          out[ix.out(b, i, h, d)] = o;
        }
      }
    }
  }
}

void attention_backward(double* dqkv, const double* dout, const double* qkv, const double* probs,
                        AttentionShape s, float p, std::uint64_t key, const RelativeRef* rel,
                        double* d_pos_query, double* d_pos_key) {
  const Index ix{s};
  const int T = s.T, D = ix.D();
  const double sqrt_d = std::sqrt(static_cast<double>(D));
  std::vector<double> dprob(T), dscore(T);
  for (int b = 0; b < s.B; ++b) {
    for (int h = 0; h < s.H; ++h) {
      for (int i = 0; i < T; ++i) {
        for (int j = 0; j < T; ++j) {
          const double prob = probs[ix.prob(b, h, i, j)];
          const double pd = dropped(prob, ix, b, h, i, j, p, key);
          // dV_j += P_drop[i][j] · dO_i;  dP_drop[i][j] = dO_i · v_j
          double dpd = 0.0;
          for (int d = 0; d < D; ++d) {
            dqkv[ix.v(b, j, h, d)] += pd * dout[ix.out(b, i, h, d)];
            dpd += dout[ix.out(b, i, h, d)] * qkv[ix.v(b, j, h, d)];
          }
          // dP = dP_drop ⊙ keep / (1-p): the same map as dropout, applied to the gradient.
          dprob[j] = dropped(dpd, ix, b, h, i, j, p, key);
        }
        // Softmax backward: dS_j = P_j (dP_j - Σ_k dP_k P_k).
        double r = 0.0;
        for (int j = 0; j < T; ++j) r += dprob[j] * probs[ix.prob(b, h, i, j)];
        for (int j = 0; j < T; ++j) dscore[j] = probs[ix.prob(b, h, i, j)] * (dprob[j] - r);
        // score_ij = Σ_d (q_id / √D) k_jd (with rel: see ref.h).
        const double scale = rel != nullptr ? rel->scale : 1.0 / sqrt_d;
        for (int j = 0; j < T; ++j) {
          for (int d = 0; d < D; ++d) {
            const double g = dscore[j] * scale;
            dqkv[ix.q(b, i, h, d)] += g * qkv[ix.k(b, j, h, d)];
            dqkv[ix.k(b, j, h, d)] += g * qkv[ix.q(b, i, h, d)];
            if (rel == nullptr) continue;
            const std::int64_t col = h * D + d;
            if (rel->c2p_rows != nullptr) {
              const std::int64_t at = rel->c2p_rows[i - j + T - 1] * rel->ld + col;
              dqkv[ix.q(b, i, h, d)] += g * rel->pos_key[at];
              d_pos_key[at] += g * qkv[ix.q(b, i, h, d)];
            }
            if (rel->p2c_rows != nullptr) {
              const std::int64_t at = rel->p2c_rows[i - j + T - 1] * rel->ld + col;
              dqkv[ix.k(b, j, h, d)] += g * rel->pos_query[at];
              d_pos_query[at] += g * qkv[ix.k(b, j, h, d)];
            }
          }
        }
      }
    }
  }
}

}  // namespace bertfit::ref
