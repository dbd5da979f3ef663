// The reference classifier (see ref_model.h), straight from the formulas:
//   x0 = LN(word[ids] + pos[p] (+ type[tt])) (then x0·Wpᵀ + bp, ELECTRA's projection), p = t,
//        or in the RoBERTa family the count of non-padding ids up to t plus pad_token_id
//        (pad_token_id at padding)
//   per layer: q,k,v = x·Wqᵀ+bq, x·Wkᵀ+bk, x·Wvᵀ+bv; a = Attn(q,k,v)
//              h1 = LN1(x + a·Woᵀ + bo); out = LN2(h1 + act(h1·W1ᵀ + b1)·W2ᵀ + b2)
//   sequence head: logits = Wc · g(Wp · out[:,0] + bp) + bc, g the family's (ReLU, tanh, GELU)
//   token head: logits[t] = Wc · out[t] + bc on every token, padding included (as transformers)
// and the backward pass as the chain rule read bottom-up.
#include "model/ref/ref_model.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "kernels/ref/ref.h"
#include "model/family.h"
#include "model/layer.h"
#include "model/relative_positions.h"

namespace bertfit::ref {
namespace {

using Vec = std::vector<double>;

// y (M,N) = x (M,K) · wᵀ + b, w (N,K).
void linear(double* y, const double* x, const double* w, const double* b, std::int64_t M,
            std::int64_t K, std::int64_t N) {
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t n = 0; n < N; ++n) {
      double s = b != nullptr ? b[n] : 0.0;
      for (std::int64_t k = 0; k < K; ++k) s += x[m * K + k] * w[n * K + k];
      y[m * N + n] = s;
    }
}

// dx (M,K) += dy·w; dw (N,K) += dyᵀ·x; db (N) += Σ dy (b, db null: no bias).
void linear_backward(double* dx, double* dw, double* db, const double* dy, const double* x,
                     const double* w, std::int64_t M, std::int64_t K, std::int64_t N) {
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t n = 0; n < N; ++n) {
      const double g = dy[m * N + n];
      if (db != nullptr) db[n] += g;
      for (std::int64_t k = 0; k < K; ++k) {
        dx[m * K + k] += g * w[n * K + k];
        dw[n * K + k] += g * x[m * K + k];
      }
    }
}

// Position ids written out here, not shared with the engine (model/activations.h), so that a
// wrong rule there shows: t, or RoBERTa's create_position_ids_from_input_ids,
// cumsum(ids != pad) · (ids != pad) + pad.
std::vector<std::int32_t> position_ids_of(const ModelConfig& c, const ModelBatch& in) {
  std::vector<std::int32_t> pos(in.input_ids.size());
  for (std::size_t b = 0; b < static_cast<std::size_t>(in.B); ++b) {
    std::int32_t real = 0;
    for (std::size_t t = 0; t < static_cast<std::size_t>(in.T); ++t) {
      const std::size_t p = b * in.T + t;
      if (c.family->position_ids == PositionIds::kIndex) {
        pos[p] = static_cast<std::int32_t>(t);
      } else if (in.input_ids[p] == c.pad_token_id) {
        pos[p] = c.pad_token_id;
      } else {
        pos[p] = ++real + c.pad_token_id;
      }
    }
  }
  return pos;
}

// transformers' CrossEntropyLoss(ignore_index=-100) over rows of logits (R,K), written out: the
// mean over the M rows whose label is not -100 of log Σ_k exp(z_k) − z_y; dlogits (R,K) =
// (softmax(z) − onehot(y)) / M on those rows, 0 on the others.
double token_cross_entropy(Vec& dlogits, const Vec& logits, const Vec& labels, int K) {
  const std::size_t R = labels.size();
  CHECK(logits.size() == R * K, "token labels for ", R, " rows, logits for ", logits.size() / K);
  std::int64_t M = 0;
  for (double y : labels) M += y != -100;
  CHECK(M > 0, "token labels all -100");
  double loss = 0;
  for (std::size_t row = 0; row < R; ++row) {
    if (labels[row] == -100) continue;
    const int y = static_cast<int>(labels[row]);
    CHECK(y >= 0 && y < K, "token label ", labels[row], " outside [0,", K, ")");
    const double* z = &logits[row * K];
    const double mx = *std::max_element(z, z + K);
    double sum = 0;
    for (int k = 0; k < K; ++k) sum += std::exp(z[k] - mx);
    loss += mx + std::log(sum) - z[y];
    for (int k = 0; k < K; ++k)
      dlogits[row * K + k] = (std::exp(z[k] - mx) / sum - (k == y ? 1.0 : 0.0)) / M;
  }
  return loss / M;
}

struct Layer {  // what the forward keeps for the backward
  Vec x, qkv, probs, att, r1, mean1, rstd1, h1, f1, a, r2, mean2, rstd2;
};

// The loss of logits (rows, K) as transformers takes it for the head and problem type, and
// dlogits.
double head_loss(const ModelConfig& c, bool per_token, const Vec& logits, const ModelBatch& in,
                 Vec& dlogits) {
  const int B = in.B, K = c.num_labels;
  const std::int64_t rows = per_token ? std::int64_t{B} * in.T : B;
  const std::int64_t per_row = !per_token && c.problem() == ProblemType::kMultiLabel ? K : 1;
  CHECK(static_cast<std::int64_t>(in.labels.size()) == rows * per_row, in.labels.size(),
        " labels for ", rows, " rows");
  dlogits.assign(rows * K, 0.0);
  Vec probs(rows * K);
  switch (per_token ? ProblemType::kSingleLabel : c.problem()) {
    case ProblemType::kRegression:
      CHECK(K == 1, "regression with ", K, " outputs");
      mse_backward(dlogits.data(), logits.data(), in.labels.data(), B, 1.0);
      return mse_forward(logits.data(), in.labels.data(), B);
    case ProblemType::kMultiLabel: {
      const double l = bce_with_logits_forward(probs.data(), logits.data(), in.labels.data(), B, K);
      bce_with_logits_backward(dlogits.data(), probs.data(), in.labels.data(), B, K, 1.0);
      return l;
    }
    case ProblemType::kSingleLabel:
      break;
  }
  if (per_token) return token_cross_entropy(dlogits, logits, in.labels, K);
  std::vector<std::int32_t> ids(in.labels.begin(), in.labels.end());
  const double l = cross_entropy_forward(probs.data(), logits.data(), ids.data(), B, K);
  cross_entropy_backward(dlogits.data(), probs.data(), ids.data(), B, K, 1.0);
  return l;
}

// Windowed attention written out (ModernBERT): per (b, h, i) the scores q_i·k_j/√D over the
// real keys j with |i - j| <= window (every real key when window < 0, or when the window holds
// none: a row past the sequence's end, which nothing reads), softmax, Σ p_j v_j.
void window_attention(Vec& att, Vec& probs, const Vec& qkv, const ModelBatch& in, int C, int H,
                      int window) {
  const int B = in.B, T = in.T, D = C / H;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  att.assign(std::int64_t{B} * T * C, 0.0);
  probs.assign(std::int64_t{B} * H * T * T, 0.0);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < T; ++i) {
        auto visible = [&](int j, bool windowed) {
          return in.attention_mask[b * T + j] != 0 &&
                 (!windowed || window < 0 || std::abs(i - j) <= window);
        };
        bool any = false;
        for (int j = 0; j < T; ++j) any = any || visible(j, true);
        double* p = &probs[((std::int64_t{b} * H + h) * T + i) * T];
        const double* q = &qkv[(std::int64_t{b} * T + i) * 3 * C + h * D];
        double mx = -1e300;
        for (int j = 0; j < T; ++j) {
          if (!visible(j, any)) continue;
          const double* k = &qkv[(std::int64_t{b} * T + j) * 3 * C + C + h * D];
          double sc = 0;
          for (int d = 0; d < D; ++d) sc += q[d] * k[d];
          p[j] = sc * scale;
          mx = std::max(mx, p[j]);
        }
        double sum = 0;
        for (int j = 0; j < T; ++j) {
          p[j] = visible(j, any) ? std::exp(p[j] - mx) : 0.0;
          sum += p[j];
        }
        for (int j = 0; j < T; ++j) p[j] /= sum;
        double* o = &att[(std::int64_t{b} * T + i) * C + h * D];
        for (int j = 0; j < T; ++j) {
          const double* v = &qkv[(std::int64_t{b} * T + j) * 3 * C + 2 * C + h * D];
          for (int d = 0; d < D; ++d) o[d] += p[j] * v[d];
        }
      }
}

// dqkv (written) from datt through the saved probabilities (dS = P ⊙ (dP − Σ P dP)).
void window_attention_backward(Vec& dqkv, const Vec& datt, const Vec& qkv, const Vec& probs,
                               const ModelBatch& in, int C, int H) {
  const int B = in.B, T = in.T, D = C / H;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  dqkv.assign(std::int64_t{B} * T * 3 * C, 0.0);
  Vec dp(T);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < T; ++i) {
        const double* p = &probs[((std::int64_t{b} * H + h) * T + i) * T];
        const double* dO = &datt[(std::int64_t{b} * T + i) * C + h * D];
        double r = 0;
        for (int j = 0; j < T; ++j) {
          const double* v = &qkv[(std::int64_t{b} * T + j) * 3 * C + 2 * C + h * D];
          double* dv = &dqkv[(std::int64_t{b} * T + j) * 3 * C + 2 * C + h * D];
          dp[j] = 0;
          for (int d = 0; d < D; ++d) {
            dp[j] += dO[d] * v[d];
            dv[d] += p[j] * dO[d];
          }
          r += p[j] * dp[j];
        }
        const double* q = &qkv[(std::int64_t{b} * T + i) * 3 * C + h * D];
        double* dq = &dqkv[(std::int64_t{b} * T + i) * 3 * C + h * D];
        for (int j = 0; j < T; ++j) {
          const double ds = p[j] * (dp[j] - r) * scale;
          if (ds == 0.0) continue;
          const double* k = &qkv[(std::int64_t{b} * T + j) * 3 * C + C + h * D];
          double* dk = &dqkv[(std::int64_t{b} * T + j) * 3 * C + C + h * D];
          for (int d = 0; d < D; ++d) {
            dq[d] += ds * k[d];
            dk[d] += ds * q[d];
          }
        }
      }
}

// The pre-norm model (ModernBERT), from the formulas of model/layer.h:
//   x0 = LN(word[ids]); per layer n1 = LN1(x) (x in a layer without attention norm),
//   qkv = n1·Wqkvᵀ (+b), q, k rotated (rotate_half; the layer's base), a = windowed Attn,
//   h = x + a·Woᵀ (+b), g = LN2(h)·Wiᵀ (+b), x = h + (gelu(g[:, :I]) · g[:, I:])·W2ᵀ (+b);
//   z = LN_final(x); sequence head: pooled = z[:,0] or the mean of the real rows, logits =
//   Wc · LN_head(act(Wd · pooled (+b))) + bc; token head the same on every row.
// Biases and norm biases where the layout has them.
ModelResult pre_norm_forward_backward(const ModelConfig& c, const ParamLayout& lay,
                                      const Vec& params, const ModelBatch& in) {
  const int B = in.B, T = in.T, C = c.hidden, I = c.intermediate, F = c.ffn_inner(),
            K = c.num_labels, L = c.layers, H = c.heads;
  const std::int64_t N = std::int64_t{B} * T;
  const double eps = c.layer_norm_eps;
  CHECK(c.structure.gated_ffn, "the pre-norm reference has a gated FFN");
  auto P = [&](Role r, int l = 0) { return params.data() + lay.offset(r, l); };
  auto Po = [&](Role r, int l = 0) -> const double* {  // a tensor the layout may leave out
    return lay.has(r, l) ? P(r, l) : nullptr;
  };
  const Vec zeros(std::max(C, F), 0.0);
  auto bias = [&](Role r, int l = 0) { return lay.has(r, l) ? P(r, l) : zeros.data(); };
  const ActKind act = activation_kind(c.activation);
  const ActKind head_act =
      c.pooler_activation ? activation_kind(*c.pooler_activation) : c.family->head.activation;

  Vec emb(N * C), emb_mean(N), emb_rstd(N), x(N * C);
  for (std::int64_t r = 0; r < N; ++r)
    std::copy_n(P(Role::kWordEmb) + in.input_ids[r] * C, C, &emb[r * C]);
  layernorm_forward(x.data(), emb_mean.data(), emb_rstd.data(), emb.data(), P(Role::kEmbLnW),
                    bias(Role::kEmbLnB), N, C, eps);
  struct Saved {
    Vec x, n1, mean1, rstd1, qkv, probs, att, h, n2, mean2, rstd2, g, f;
  };
  std::vector<Saved> saved(L);
  for (int l = 0; l < L; ++l) {
    Saved& s = saved[l];
    s.x = x;
    const bool norm1 = lay.has(Role::kLn1W, l);
    s.n1 = x;
    if (norm1) {
      s.mean1.resize(N), s.rstd1.resize(N);
      layernorm_forward(s.n1.data(), s.mean1.data(), s.rstd1.data(), x.data(), P(Role::kLn1W, l),
                        bias(Role::kLn1B, l), N, C, eps);
    }
    s.qkv.resize(N * 3 * C);
    linear(s.qkv.data(), s.n1.data(), P(Role::kQW, l), Po(Role::kQB, l), N, C, 3 * C);
    if (c.rotary.enabled) rotary_forward(s.qkv.data(), c.rotary.theta(l), N, T, C, H);
    window_attention(s.att, s.probs, s.qkv, in, C, H,
                     c.rotary.enabled ? c.rotary.window_half(l) : -1);
    s.h.resize(N * C);
    linear(s.h.data(), s.att.data(), P(Role::kOW, l), Po(Role::kOB, l), N, C, C);
    add_forward(s.h.data(), s.h.data(), x.data(), N * C);
    s.n2.resize(N * C), s.mean2.resize(N), s.rstd2.resize(N);
    layernorm_forward(s.n2.data(), s.mean2.data(), s.rstd2.data(), s.h.data(), P(Role::kLn2W, l),
                      bias(Role::kLn2B, l), N, C, eps);
    s.g.resize(N * F), s.f.resize(N * I);
    linear(s.g.data(), s.n2.data(), P(Role::kFf1W, l), Po(Role::kFf1B, l), N, C, F);
    gated_activation_forward(act, s.f.data(), s.g.data(), N, I, 0.0f, 0);
    linear(x.data(), s.f.data(), P(Role::kFf2W, l), Po(Role::kFf2B, l), N, I, C);
    add_forward(x.data(), x.data(), s.h.data(), N * C);
  }
  const int Lf = L - 1;
  Vec z(N * C), z_mean(N), z_rstd(N);
  layernorm_forward(z.data(), z_mean.data(), z_rstd.data(), x.data(), P(Role::kFinalLnW, Lf),
                    bias(Role::kFinalLnB, Lf), N, C, eps);
  // The head on R rows: the pooled vectors (sequence head) or every row (token head).
  const bool per_token = c.head == HeadKind::kTokenClassification;
  const std::int64_t R = per_token ? N : B;
  Vec pooled(R * C), counts(B, 0.0);
  if (per_token) {
    pooled = z;
  } else {
    for (int b = 0; b < B; ++b) {
      for (int t = 0; t < T; ++t) {
        const bool take =
            c.classifier_pooling == Pooling::kMean ? in.attention_mask[b * T + t] != 0 : t == 0;
        if (!take) continue;
        counts[b] += 1;
        for (int ch = 0; ch < C; ++ch) pooled[b * C + ch] += z[(std::int64_t{b} * T + t) * C + ch];
      }
      for (int ch = 0; ch < C; ++ch) pooled[b * C + ch] /= counts[b];
    }
  }
  Vec pre(R * C), a(R * C), hn(R * C), hn_mean(R), hn_rstd(R);
  linear(pre.data(), pooled.data(), P(Role::kPreW), Po(Role::kPreB), R, C, C);
  activation_forward(head_act, a.data(), pre.data(), R * C);
  layernorm_forward(hn.data(), hn_mean.data(), hn_rstd.data(), a.data(), P(Role::kHeadLnW),
                    bias(Role::kHeadLnB), R, C, eps);
  ModelResult r;
  r.logits.resize(R * K);
  linear(r.logits.data(), hn.data(), P(Role::kClsW), P(Role::kClsB), R, C, K);
  if (in.labels.empty()) return r;
  Vec dlogits;
  r.loss = head_loss(c, per_token, r.logits, in, dlogits);

  r.grads.assign(lay.total(), 0.0);
  Vec sink(std::max(C, F), 0.0);  // gradients of tensors the layout leaves out
  auto G = [&](Role role, int l = 0) { return r.grads.data() + lay.offset(role, l); };
  auto Go = [&](Role role, int l = 0) -> double* {
    return lay.has(role, l) ? G(role, l) : nullptr;
  };
  auto Gb = [&](Role role, int l = 0) { return lay.has(role, l) ? G(role, l) : sink.data(); };
  Vec dhn(R * C, 0.0), da(R * C), dpre(R * C, 0.0), dpooled(R * C, 0.0);
  linear_backward(dhn.data(), G(Role::kClsW), G(Role::kClsB), dlogits.data(), hn.data(),
                  P(Role::kClsW), R, C, K);
  layernorm_backward(da.data(), G(Role::kHeadLnW), Gb(Role::kHeadLnB), dhn.data(), a.data(),
                     P(Role::kHeadLnW), hn_mean.data(), hn_rstd.data(), R, C);
  activation_backward(head_act, dpre.data(), da.data(), pre.data(), a.data(), R * C);
  linear_backward(dpooled.data(), G(Role::kPreW), Go(Role::kPreB), dpre.data(), pooled.data(),
                  P(Role::kPreW), R, C, C);
  Vec dz(N * C, 0.0);
  if (per_token) {
    dz = dpooled;
  } else {
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < T; ++t) {
        const bool take =
            c.classifier_pooling == Pooling::kMean ? in.attention_mask[b * T + t] != 0 : t == 0;
        if (!take) continue;
        for (int ch = 0; ch < C; ++ch)
          dz[(std::int64_t{b} * T + t) * C + ch] = dpooled[b * C + ch] / counts[b];
      }
  }
  Vec dx(N * C);
  layernorm_backward(dx.data(), G(Role::kFinalLnW, Lf), Gb(Role::kFinalLnB, Lf), dz.data(),
                     x.data(), P(Role::kFinalLnW, Lf), z_mean.data(), z_rstd.data(), N, C);
  for (int l = L - 1; l >= 0; --l) {
    const Saved& s = saved[l];
    // x_out = h + f·W2ᵀ: dh = dx + the FFN's input gradient.
    Vec df(N * I, 0.0), dg(N * F), dn2(N * C, 0.0), dh(N * C);
    linear_backward(df.data(), G(Role::kFf2W, l), Go(Role::kFf2B, l), dx.data(), s.f.data(),
                    P(Role::kFf2W, l), N, I, C);
    gated_activation_backward(act, dg.data(), df.data(), s.g.data(), N, I, 0.0f, 0);
    linear_backward(dn2.data(), G(Role::kFf1W, l), Go(Role::kFf1B, l), dg.data(), s.n2.data(),
                    P(Role::kFf1W, l), N, C, F);
    layernorm_backward(dh.data(), G(Role::kLn2W, l), Gb(Role::kLn2B, l), dn2.data(), s.h.data(),
                       P(Role::kLn2W, l), s.mean2.data(), s.rstd2.data(), N, C);
    add_forward(dh.data(), dh.data(), dx.data(), N * C);
    // h = x + a·Woᵀ: dx = dh + the attention's input gradient.
    Vec datt(N * C, 0.0), dqkv, dn1(N * C, 0.0);
    linear_backward(datt.data(), G(Role::kOW, l), Go(Role::kOB, l), dh.data(), s.att.data(),
                    P(Role::kOW, l), N, C, C);
    window_attention_backward(dqkv, datt, s.qkv, s.probs, in, C, H);
    if (c.rotary.enabled) rotary_backward(dqkv.data(), c.rotary.theta(l), N, T, C, H);
    linear_backward(dn1.data(), G(Role::kQW, l), Go(Role::kQB, l), dqkv.data(), s.n1.data(),
                    P(Role::kQW, l), N, C, 3 * C);
    dx = dh;
    if (lay.has(Role::kLn1W, l)) {
      Vec dxn(N * C);
      layernorm_backward(dxn.data(), G(Role::kLn1W, l), Gb(Role::kLn1B, l), dn1.data(), s.x.data(),
                         P(Role::kLn1W, l), s.mean1.data(), s.rstd1.data(), N, C);
      add_forward(dx.data(), dx.data(), dxn.data(), N * C);
    } else {
      add_forward(dx.data(), dx.data(), dn1.data(), N * C);
    }
  }
  Vec demb(N * C);
  layernorm_backward(demb.data(), G(Role::kEmbLnW), Gb(Role::kEmbLnB), dx.data(), emb.data(),
                     P(Role::kEmbLnW), emb_mean.data(), emb_rstd.data(), N, C);
  for (std::int64_t row = 0; row < N; ++row) {
    if (in.input_ids[row] == c.pad_token_id) continue;  // padding_idx: no gradient
    double* g = G(Role::kWordEmb) + std::int64_t{in.input_ids[row]} * C;
    for (int ch = 0; ch < C; ++ch) g[ch] += demb[row * C + ch];
  }
  return r;
}

}  // namespace

ModelResult model_forward_backward(const ModelConfig& c, const ParamLayout& lay, const Vec& params,
                                   const ModelBatch& in) {
  if (c.structure.pre_norm) return pre_norm_forward_backward(c, lay, params, in);
  const int B = in.B, T = in.T, C = c.hidden, I = c.intermediate, K = c.num_labels, L = c.layers;
  const std::int64_t N = std::int64_t{B} * T;
  const bool types_on = c.token_types();
  const double eps = c.layer_norm_eps;
  auto P = [&](Role r, int l = 0) { return params.data() + lay.offset(r, l); };
  const std::vector<std::int32_t> positions = position_ids_of(c, in);
  const std::int32_t* types = types_on ? in.token_type_ids.data() : nullptr;
  AttentionShape shape{B, T, C, c.heads};
  shape.query_mask = c.family->masks_padding_rows;
  // DeBERTa: the embeddings of padding tokens are zeroed (embeddings * mask).
  auto zero_padding = [&](Vec& rows, int width) {
    if (!c.family->masks_padding_rows) return;
    for (std::int64_t r = 0; r < N; ++r) {
      if (in.attention_mask[r] == 0) std::fill_n(&rows[r * width], width, 0.0);
    }
  };

  // Embeddings (E wide), projected to C when the layout has the projection (ELECTRA).
  const int E = c.embedding_dim();
  const bool project = lay.has(Role::kProjW);
  Vec emb(N * E), emb_mean(N), emb_rstd(N), normed(N * E), x(N * C);
  const bool absolute = c.absolute_positions;
  embedding_forward(emb.data(), in.input_ids.data(), positions.data(), types, P(Role::kWordEmb),
                    absolute ? P(Role::kPosEmb) : nullptr, types_on ? P(Role::kTypeEmb) : nullptr,
                    N, E);
  layernorm_forward(normed.data(), emb_mean.data(), emb_rstd.data(), emb.data(), P(Role::kEmbLnW),
                    P(Role::kEmbLnB), N, E, eps);
  zero_padding(normed, E);
  if (project) {
    linear(x.data(), normed.data(), P(Role::kProjW), P(Role::kProjB), N, E, C);
  } else {
    x = normed;
  }
  // Relative positions (DeBERTa): rel = LN(table), and per layer [pq | pk] = rel·[Wq; Wk]ᵀ + b.
  const bool relative = c.relative.enabled;
  const std::int64_t Pr = relative ? RelativePositions::rows(c) : 0;
  Vec rel(Pr * C), rel_mean(Pr), rel_rstd(Pr);
  std::vector<std::int32_t> c2p_rows, p2c_rows;
  if (relative) {
    if (c.relative.layer_norm) {
      layernorm_forward(rel.data(), rel_mean.data(), rel_rstd.data(), P(Role::kRelEmb),
                        P(Role::kRelLnW), P(Role::kRelLnB), Pr, C, eps);
    } else {
      std::copy_n(P(Role::kRelEmb), Pr * C, rel.data());
    }
    c2p_rows = relative_rows(c, T, false);
    p2c_rows = relative_rows(c, T, true);
  }
  const double rel_scale = 1.0 / std::sqrt(c.head_dim() * (1.0 + c.relative.c2p + c.relative.p2c));
  std::vector<Vec> pos_qk(L);
  auto rel_ref = [&](int l) {
    return RelativeRef{pos_qk[l].data(),
                       pos_qk[l].data() + C,
                       2 * std::int64_t{C},
                       c.relative.c2p ? c2p_rows.data() : nullptr,
                       c.relative.p2c ? p2c_rows.data() : nullptr,
                       rel_scale};
  };
  // Encoder layers.
  std::vector<Layer> saved(L);
  for (int l = 0; l < L; ++l) {
    Layer& s = saved[l];
    s.x = x;
    Vec q(N * C), k(N * C), v(N * C);
    linear(q.data(), x.data(), P(Role::kQW, l), P(Role::kQB, l), N, C, C);
    linear(k.data(), x.data(), P(Role::kKW, l), P(Role::kKB, l), N, C, C);
    linear(v.data(), x.data(), P(Role::kVW, l), P(Role::kVB, l), N, C, C);
    s.qkv.resize(N * 3 * C);
    for (std::int64_t r = 0; r < N; ++r) {
      std::copy_n(&q[r * C], C, &s.qkv[r * 3 * C]);
      std::copy_n(&k[r * C], C, &s.qkv[r * 3 * C + C]);
      std::copy_n(&v[r * C], C, &s.qkv[r * 3 * C + 2 * C]);
    }
    s.att.resize(N * C);
    s.probs.resize(std::int64_t{B} * c.heads * T * T);
    RelativeRef rr;
    if (relative) {
      Vec pq(Pr * C), pk(Pr * C);
      linear(pq.data(), rel.data(), P(Role::kQW, l), P(Role::kQB, l), Pr, C, C);
      linear(pk.data(), rel.data(), P(Role::kKW, l), P(Role::kKB, l), Pr, C, C);
      pos_qk[l].resize(Pr * 2 * C);
      for (std::int64_t r = 0; r < Pr; ++r) {
        std::copy_n(&pq[r * C], C, &pos_qk[l][r * 2 * C]);
        std::copy_n(&pk[r * C], C, &pos_qk[l][r * 2 * C + C]);
      }
      rr = rel_ref(l);
    }
    attention_forward(s.att.data(), s.probs.data(), s.qkv.data(), in.attention_mask.data(), shape,
                      0.0f, 0, relative ? &rr : nullptr);
    s.r1.resize(N * C);
    linear(s.r1.data(), s.att.data(), P(Role::kOW, l), P(Role::kOB, l), N, C, C);
    add_forward(s.r1.data(), s.r1.data(), x.data(), N * C);
    s.h1.resize(N * C), s.mean1.resize(N), s.rstd1.resize(N);
    layernorm_forward(s.h1.data(), s.mean1.data(), s.rstd1.data(), s.r1.data(), P(Role::kLn1W, l),
                      P(Role::kLn1B, l), N, C, eps);
    s.f1.resize(N * I), s.a.resize(N * I);
    linear(s.f1.data(), s.h1.data(), P(Role::kFf1W, l), P(Role::kFf1B, l), N, C, I);
    activation_forward(activation_kind(c.activation), s.a.data(), s.f1.data(), N * I);
    s.r2.resize(N * C);
    linear(s.r2.data(), s.a.data(), P(Role::kFf2W, l), P(Role::kFf2B, l), N, I, C);
    add_forward(s.r2.data(), s.r2.data(), s.h1.data(), N * C);
    s.mean2.resize(N), s.rstd2.resize(N);
    layernorm_forward(x.data(), s.mean2.data(), s.rstd2.data(), s.r2.data(), P(Role::kLn2W, l),
                      P(Role::kLn2B, l), N, C, eps);
  }
  // The head: logits (B,K) from each sequence's first token, or (B·T,K) from every token.
  const bool per_token = c.head == HeadKind::kTokenClassification;
  const std::int64_t rows = per_token ? N : B;
  const ActKind head_act =
      c.pooler_activation ? activation_kind(*c.pooler_activation) : c.family->head.activation;
  const int W = c.pooler_dim();
  Vec cls(std::int64_t{B} * C), pre_lin(B * W), pre(B * W);
  ModelResult r;
  r.logits.resize(rows * K);
  if (per_token) {
    linear(r.logits.data(), x.data(), P(Role::kClsW), P(Role::kClsB), N, C, K);
  } else {
    for (int b = 0; b < B; ++b) std::copy_n(&x[std::int64_t{b} * T * C], C, &cls[b * C]);
    linear(pre_lin.data(), cls.data(), P(Role::kPreW), P(Role::kPreB), B, C, W);
    activation_forward(head_act, pre.data(), pre_lin.data(), std::int64_t{B} * W);
    linear(r.logits.data(), pre.data(), P(Role::kClsW), P(Role::kClsB), B, W, K);
  }
  if (in.labels.empty()) return r;

  // Loss, as transformers for the head and problem type.
  Vec dlogits;
  r.loss = head_loss(c, per_token, r.logits, in, dlogits);

  // Backward.
  r.grads.assign(lay.total(), 0.0);
  auto G = [&](Role role, int l = 0) { return r.grads.data() + lay.offset(role, l); };
  Vec dx(N * C, 0.0);
  if (per_token) {
    linear_backward(dx.data(), G(Role::kClsW), G(Role::kClsB), dlogits.data(), x.data(),
                    P(Role::kClsW), N, C, K);
  } else {
    Vec dpre(B * W, 0.0), dpre_lin(B * W, 0.0), dcls(B * C, 0.0);
    linear_backward(dpre.data(), G(Role::kClsW), G(Role::kClsB), dlogits.data(), pre.data(),
                    P(Role::kClsW), B, W, K);
    activation_backward(head_act, dpre_lin.data(), dpre.data(), pre_lin.data(), pre.data(),
                        std::int64_t{B} * W);
    linear_backward(dcls.data(), G(Role::kPreW), G(Role::kPreB), dpre_lin.data(), cls.data(),
                    P(Role::kPreW), B, C, W);
    for (int b = 0; b < B; ++b) std::copy_n(&dcls[b * C], C, &dx[std::int64_t{b} * T * C]);
  }
  Vec d_rel(Pr * C, 0.0);
  for (int l = L - 1; l >= 0; --l) {
    const Layer& s = saved[l];
    Vec dr2(N * C), da(N * I, 0.0), df1(N * I, 0.0), dr1(N * C), datt(N * C, 0.0);
    layernorm_backward(dr2.data(), G(Role::kLn2W, l), G(Role::kLn2B, l), dx.data(), s.r2.data(),
                       P(Role::kLn2W, l), s.mean2.data(), s.rstd2.data(), N, C);
    Vec dh1 = dr2;  // the residual
    linear_backward(da.data(), G(Role::kFf2W, l), G(Role::kFf2B, l), dr2.data(), s.a.data(),
                    P(Role::kFf2W, l), N, I, C);
    activation_backward(activation_kind(c.activation), df1.data(), da.data(), s.f1.data(),
                        s.a.data(), N * I);
    linear_backward(dh1.data(), G(Role::kFf1W, l), G(Role::kFf1B, l), df1.data(), s.h1.data(),
                    P(Role::kFf1W, l), N, C, I);
    layernorm_backward(dr1.data(), G(Role::kLn1W, l), G(Role::kLn1B, l), dh1.data(), s.r1.data(),
                       P(Role::kLn1W, l), s.mean1.data(), s.rstd1.data(), N, C);
    dx = dr1;  // the residual
    linear_backward(datt.data(), G(Role::kOW, l), G(Role::kOB, l), dr1.data(), s.att.data(),
                    P(Role::kOW, l), N, C, C);
    Vec dqkv(N * 3 * C, 0.0), d_pos(Pr * 2 * C, 0.0);
    const RelativeRef rr = relative ? rel_ref(l) : RelativeRef{};
    attention_backward(dqkv.data(), datt.data(), s.qkv.data(), s.probs.data(), shape, 0.0f, 0,
                       relative ? &rr : nullptr, d_pos.data(), d_pos.data() + C);
    if (relative) {  // [pq | pk] = rel·[Wq; Wk]ᵀ + b
      Vec dpq(Pr * C), dpk(Pr * C);
      for (std::int64_t r = 0; r < Pr; ++r) {
        std::copy_n(&d_pos[r * 2 * C], C, &dpq[r * C]);
        std::copy_n(&d_pos[r * 2 * C + C], C, &dpk[r * C]);
      }
      linear_backward(d_rel.data(), G(Role::kQW, l), G(Role::kQB, l), dpq.data(), rel.data(),
                      P(Role::kQW, l), Pr, C, C);
      linear_backward(d_rel.data(), G(Role::kKW, l), G(Role::kKB, l), dpk.data(), rel.data(),
                      P(Role::kKW, l), Pr, C, C);
    }
    Vec dq(N * C), dk(N * C), dv(N * C);
    for (std::int64_t row = 0; row < N; ++row) {
      std::copy_n(&dqkv[row * 3 * C], C, &dq[row * C]);
      std::copy_n(&dqkv[row * 3 * C + C], C, &dk[row * C]);
      std::copy_n(&dqkv[row * 3 * C + 2 * C], C, &dv[row * C]);
    }
    linear_backward(dx.data(), G(Role::kQW, l), G(Role::kQB, l), dq.data(), s.x.data(),
                    P(Role::kQW, l), N, C, C);
    linear_backward(dx.data(), G(Role::kKW, l), G(Role::kKB, l), dk.data(), s.x.data(),
                    P(Role::kKW, l), N, C, C);
    linear_backward(dx.data(), G(Role::kVW, l), G(Role::kVB, l), dv.data(), s.x.data(),
                    P(Role::kVW, l), N, C, C);
  }
  if (relative) {
    Vec d_table = d_rel;
    if (c.relative.layer_norm) {
      layernorm_backward(d_table.data(), G(Role::kRelLnW), G(Role::kRelLnB), d_rel.data(),
                         P(Role::kRelEmb), P(Role::kRelLnW), rel_mean.data(), rel_rstd.data(), Pr,
                         C);
    }
    add_forward(G(Role::kRelEmb), G(Role::kRelEmb), d_table.data(), Pr * C);
  }
  Vec dnormed = dx;
  if (project) {
    dnormed.assign(N * E, 0.0);
    linear_backward(dnormed.data(), G(Role::kProjW), G(Role::kProjB), dx.data(), normed.data(),
                    P(Role::kProjW), N, E, C);
  }
  zero_padding(dnormed, E);
  Vec demb(N * E);
  layernorm_backward(demb.data(), G(Role::kEmbLnW), G(Role::kEmbLnB), dnormed.data(), emb.data(),
                     P(Role::kEmbLnW), emb_mean.data(), emb_rstd.data(), N, E);
  embedding_backward(G(Role::kWordEmb), absolute ? G(Role::kPosEmb) : nullptr,
                     types_on ? G(Role::kTypeEmb) : nullptr, demb.data(), in.input_ids.data(),
                     positions.data(), types, N, E, c.pad_token_id);
  return r;
}

}  // namespace bertfit::ref
