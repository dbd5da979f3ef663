// Scalar double-precision references: LayerNorm, activations, dropout, elementwise helpers,
// embeddings, losses and AdamW. Plain loops over the definitions, one formula per line.
#include "kernels/ref/ref.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "base/check.h"
#include "kernels/dropout.h"

namespace bertfit::ref {

void layernorm_forward(double* out, double* mean, double* rstd, const double* x,
                       const double* weight, const double* bias, std::int64_t N, int C,
                       double eps) {
  for (std::int64_t r = 0; r < N; ++r) {
    const double* xr = x + r * C;
    double mu = 0.0;
    for (int c = 0; c < C; ++c) mu += xr[c];
    mu /= C;
    double var = 0.0;
    for (int c = 0; c < C; ++c) var += (xr[c] - mu) * (xr[c] - mu);
    var /= C;
    const double rs = 1.0 / std::sqrt(var + eps);
    mean[r] = mu;
    rstd[r] = rs;
    for (int c = 0; c < C; ++c) out[r * C + c] = (xr[c] - mu) * rs * weight[c] + bias[c];
  }
}

void layernorm_backward(double* dx, double* dweight, double* dbias, const double* dout,
                        const double* x, const double* weight, const double* mean,
                        const double* rstd, std::int64_t N, int C) {
  std::vector<double> xhat(C), g(C);
  for (std::int64_t r = 0; r < N; ++r) {
    double mean_g = 0.0, mean_gx = 0.0;
    for (int c = 0; c < C; ++c) {
      xhat[c] = (x[r * C + c] - mean[r]) * rstd[r];
      g[c] = dout[r * C + c] * weight[c];  // gradient w.r.t. xhat
      mean_g += g[c] / C;
      mean_gx += g[c] * xhat[c] / C;
      dweight[c] += dout[r * C + c] * xhat[c];
      dbias[c] += dout[r * C + c];
    }
    for (int c = 0; c < C; ++c) dx[r * C + c] = rstd[r] * (g[c] - mean_g - xhat[c] * mean_gx);
  }
}

void dropout_add_layernorm_forward(double* out, double* res, double* mean, double* rstd,
                                   const double* y, const double* x, const double* weight,
                                   const double* bias, std::int64_t N, int C, double eps, float p,
                                   std::uint64_t key) {
  dropout_forward(res, y, N * C, p, key);
  add_forward(res, res, x, N * C);
  layernorm_forward(out, mean, rstd, res, weight, bias, N, C, eps);
}

void layernorm_dropout_bias_backward(double* dres, double* dweight, double* dbias, double* dy,
                                     double* ybias, const double* dout, const double* res,
                                     const double* weight, const double* mean, const double* rstd,
                                     std::int64_t N, int C, float p, std::uint64_t key) {
  layernorm_backward(dres, dweight, dbias, dout, res, weight, mean, rstd, N, C);
  dropout_backward(dy, dres, N * C, p, key);
  bias_backward(ybias, dy, N, C);
}

namespace {

constexpr double kPi = std::numbers::pi;

double act(ActKind kind, double x) {
  switch (kind) {
    case ActKind::kGelu:
      return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case ActKind::kGeluNew:
      return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / kPi) * (x + 0.044715 * x * x * x)));
    case ActKind::kRelu:
      return x > 0.0 ? x : 0.0;
    case ActKind::kTanh:
      return std::tanh(x);
  }
  return 0.0;
}

// The derivative, from x (GELU kinds) or from y = act(x) (ReLU, tanh).
double act_derivative(ActKind kind, double x, double y) {
  switch (kind) {
    case ActKind::kGelu: {
      const double cdf = 0.5 * (1.0 + std::erf(x / std::sqrt(2.0)));
      const double pdf = std::exp(-0.5 * x * x) / std::sqrt(2.0 * kPi);
      return cdf + x * pdf;
    }
    case ActKind::kGeluNew: {
      const double a = std::sqrt(2.0 / kPi), b = 0.044715;
      const double t = std::tanh(a * (x + b * x * x * x));
      return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * a * (1.0 + 3.0 * b * x * x);
    }
    case ActKind::kRelu:
      return y > 0.0 ? 1.0 : 0.0;
    case ActKind::kTanh:
      return 1.0 - y * y;
  }
  return 0.0;
}

}  // namespace

void activation_forward(ActKind kind, double* out, const double* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = act(kind, x[i]);
}

void activation_backward(ActKind kind, double* dx, const double* dout, const double* x,
                         const double* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    dx[i] += dout[i] * act_derivative(kind, x ? x[i] : 0.0, y ? y[i] : 0.0);
  }
}

void dropout_forward(double* out, const double* x, std::int64_t n, float p, std::uint64_t key) {
  const double scale = 1.0 / (1.0 - p);
  for (std::int64_t i = 0; i < n; ++i) {
    out[i] = dropout_keep(key, static_cast<std::uint64_t>(i), p) ? x[i] * scale : 0.0;
  }
}

void dropout_backward(double* dx, const double* dout, std::int64_t n, float p, std::uint64_t key) {
  const double scale = 1.0 / (1.0 - p);
  for (std::int64_t i = 0; i < n; ++i) {
    dx[i] = dropout_keep(key, static_cast<std::uint64_t>(i), p) ? dout[i] * scale : 0.0;
  }
}

void add_forward(double* out, const double* a, const double* b, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void bias_backward(double* dbias, const double* dout, std::int64_t N, int M) {
  for (std::int64_t r = 0; r < N; ++r) {
    for (int c = 0; c < M; ++c) dbias[c] += dout[r * M + c];
  }
}

void gather_rows(double* out, const double* x, const std::int64_t* row_index, std::int64_t R,
                 int C) {
  for (std::int64_t r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) out[r * C + c] = x[row_index[r] * C + c];
  }
}

void scatter_add_rows(double* dx, const double* dout, const std::int64_t* row_index, std::int64_t R,
                      int C) {
  for (std::int64_t r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) dx[row_index[r] * C + c] += dout[r * C + c];
  }
}

void embedding_forward(double* out, const std::int32_t* ids, const std::int32_t* positions,
                       const std::int32_t* types, const double* word, const double* pos,
                       const double* type, std::int64_t N, int C) {
  for (std::int64_t r = 0; r < N; ++r) {
    for (int c = 0; c < C; ++c) {
      double e = word[static_cast<std::int64_t>(ids[r]) * C + c];
      if (pos != nullptr) e += pos[static_cast<std::int64_t>(positions[r]) * C + c];
      if (type != nullptr) e += type[static_cast<std::int64_t>(types[r]) * C + c];
      out[r * C + c] = e;
    }
  }
}

void embedding_backward(double* dword, double* dpos, double* dtype, const double* dout,
                        const std::int32_t* ids, const std::int32_t* positions,
                        const std::int32_t* types, std::int64_t N, int C, int pad_id) {
  for (std::int64_t r = 0; r < N; ++r) {
    for (int c = 0; c < C; ++c) {
      const double g = dout[r * C + c];
      if (ids[r] != pad_id) dword[static_cast<std::int64_t>(ids[r]) * C + c] += g;
      if (dpos != nullptr) dpos[static_cast<std::int64_t>(positions[r]) * C + c] += g;
      if (dtype != nullptr) dtype[static_cast<std::int64_t>(types[r]) * C + c] += g;
    }
  }
}

double cross_entropy_forward(double* probs, const double* logits, const std::int32_t* labels, int B,
                             int K) {
  double loss = 0.0;
  for (int b = 0; b < B; ++b) {
    CHECK(labels[b] >= 0 && labels[b] < K, "label ", labels[b]);
    const double* z = logits + static_cast<std::int64_t>(b) * K;
    double mx = z[0];
    for (int k = 1; k < K; ++k) mx = std::max(mx, z[k]);
    double sum = 0.0;
    for (int k = 0; k < K; ++k) sum += std::exp(z[k] - mx);
    const double lse = mx + std::log(sum);
    for (int k = 0; k < K; ++k) probs[static_cast<std::int64_t>(b) * K + k] = std::exp(z[k] - lse);
    loss += (lse - z[labels[b]]) / B;
  }
  return loss;
}

void cross_entropy_backward(double* dlogits, const double* probs, const std::int32_t* labels, int B,
                            int K, double scale) {
  for (int b = 0; b < B; ++b) {
    for (int k = 0; k < K; ++k) {
      const double onehot = k == labels[b] ? 1.0 : 0.0;
      const std::int64_t i = static_cast<std::int64_t>(b) * K + k;
      dlogits[i] += scale * (probs[i] - onehot) / B;
    }
  }
}

double weighted_cross_entropy_forward(double* probs, const double* logits,
                                      const std::int32_t* labels, int B, int K,
                                      const double* weights, double eps) {
  auto w = [&](int k) { return weights == nullptr ? 1.0 : weights[k]; };
  double numerator = 0.0, denominator = 0.0;
  std::vector<double> neg_log_p(K);
  for (int b = 0; b < B; ++b) {
    CHECK(labels[b] >= 0 && labels[b] < K, "label ", labels[b]);
    const double* z = logits + static_cast<std::int64_t>(b) * K;
    double sum = 0.0;
    for (int k = 0; k < K; ++k) sum += std::exp(z[k]);  // test logits within ±80: finite
    for (int k = 0; k < K; ++k) {
      probs[static_cast<std::int64_t>(b) * K + k] = std::exp(z[k]) / sum;
      neg_log_p[k] = -std::log(std::exp(z[k]) / sum);
    }
    const int y = labels[b];
    numerator += (1 - eps) * w(y) * neg_log_p[y];
    for (int k = 0; k < K; ++k) numerator += eps / K * w(k) * neg_log_p[k];
    denominator += w(y);
  }
  return numerator / denominator;
}

void weighted_cross_entropy_backward(double* dlogits, const double* probs,
                                     const std::int32_t* labels, int B, int K,
                                     const double* weights, double eps, double scale) {
  auto w = [&](int k) { return weights == nullptr ? 1.0 : weights[k]; };
  double denominator = 0.0;
  for (int b = 0; b < B; ++b) denominator += w(labels[b]);
  for (int b = 0; b < B; ++b) {
    for (int k = 0; k < K; ++k) {
      // d(-log p_j)/dz_k = p_k - [j = k]: the label's term, then every class's smoothing term.
      const std::int64_t i = static_cast<std::int64_t>(b) * K + k;
      double g = (1 - eps) * w(labels[b]) * (probs[i] - (k == labels[b] ? 1.0 : 0.0));
      for (int j = 0; j < K; ++j) g += eps / K * w(j) * (probs[i] - (k == j ? 1.0 : 0.0));
      dlogits[i] += scale * g / denominator;
    }
  }
}

double mse_forward(const double* pred, const double* target, int B) {
  double loss = 0.0;
  for (int b = 0; b < B; ++b) loss += (pred[b] - target[b]) * (pred[b] - target[b]) / B;
  return loss;
}

void mse_backward(double* dpred, const double* pred, const double* target, int B, double scale) {
  for (int b = 0; b < B; ++b) dpred[b] += scale * 2.0 * (pred[b] - target[b]) / B;
}

double bce_with_logits_forward(double* probs, const double* logits, const double* targets, int B,
                               int K) {
  const int n = B * K;
  double loss = 0.0;
  for (int i = 0; i < n; ++i) {
    const double p = 1.0 / (1.0 + std::exp(-logits[i]));
    probs[i] = p;
    loss -= (targets[i] * std::log(p) + (1.0 - targets[i]) * std::log(1.0 - p)) / n;
  }
  return loss;
}

void bce_with_logits_backward(double* dlogits, const double* probs, const double* targets, int B,
                              int K, double scale) {
  const int n = B * K;
  for (int i = 0; i < n; ++i) dlogits[i] += scale * (probs[i] - targets[i]) / n;
}

void adamw_update(double* param, const double* grad, double* m, double* v, std::int64_t n,
                  const AdamWParams& h, bool decay) {
  const double t = static_cast<double>(h.step);
  const double bias_correction1 = 1.0 - std::pow(h.beta1, t);
  const double bias_correction2 = 1.0 - std::pow(h.beta2, t);
  for (std::int64_t i = 0; i < n; ++i) {
    if (decay) param[i] *= 1.0 - h.lr * h.weight_decay;
    m[i] = h.beta1 * m[i] + (1.0 - h.beta1) * grad[i];
    v[i] = h.beta2 * v[i] + (1.0 - h.beta2) * grad[i] * grad[i];
    const double m_hat = m[i] / bias_correction1;
    const double v_hat = v[i] / bias_correction2;
    // torch's form: (lr / bc1) · m / (sqrt(v) / sqrt(bc2) + eps) = lr · m̂ / (sqrt(v̂) + eps).
    param[i] -= h.lr * m_hat / (std::sqrt(v_hat) + h.eps);
  }
}

double sum_squares(const double* x, std::int64_t n) {
  double s = 0.0;
  for (std::int64_t i = 0; i < n; ++i) s += x[i] * x[i];
  return s;
}

void gated_activation_forward(ActKind kind, double* out, const double* x, std::int64_t M,
                              std::int64_t I, float p, std::uint64_t key) {
  std::vector<double> a(static_cast<std::size_t>(I));
  for (std::int64_t r = 0; r < M; ++r) {
    activation_forward(kind, a.data(), x + r * 2 * I, I);
    for (std::int64_t k = 0; k < I; ++k) out[r * I + k] = a[k] * x[r * 2 * I + I + k];
  }
  dropout_forward(out, out, M * I, p, key);
}

void gated_activation_backward(ActKind kind, double* dx, const double* dout, const double* x,
                               std::int64_t M, std::int64_t I, float p, std::uint64_t key) {
  std::vector<double> g(static_cast<std::size_t>(M * I)), a(static_cast<std::size_t>(I)),
      d(static_cast<std::size_t>(I));
  dropout_backward(g.data(), dout, M * I, p, key);
  for (std::int64_t r = 0; r < M; ++r) {
    const double* in = x + r * 2 * I;
    const double* gate = in + I;
    activation_forward(kind, a.data(), in, I);
    // d = act'(in) (dout = 1), from the input or the output as the kind reads.
    std::vector<double> ones(static_cast<std::size_t>(I), 1.0);
    std::fill(d.begin(), d.end(), 0.0);
    activation_backward(kind, d.data(), ones.data(), in, a.data(), I);
    for (std::int64_t k = 0; k < I; ++k) {
      const double gk = g[r * I + k];
      dx[r * 2 * I + k] = gk * gate[k] * d[k];
      dx[r * 2 * I + I + k] = gk * a[k];
    }
  }
}

namespace {

void rotary_apply(double* qkv, double theta, std::int64_t R, int T, int C, int H, double sign) {
  const int D = C / H, half = D / 2;
  for (std::int64_t r = 0; r < R; ++r) {
    const double pos = static_cast<double>(r % T);
    for (int h = 0; h < 2 * H; ++h) {  // q's heads, then k's
      double* x = qkv + r * 3 * C + static_cast<std::int64_t>(h) * D;
      for (int k = 0; k < half; ++k) {
        const double angle = pos * std::pow(theta, -2.0 * k / D);
        const double c = std::cos(angle), s = sign * std::sin(angle);
        const double a = x[k], b = x[k + half];
        x[k] = a * c - b * s;
        x[k + half] = b * c + a * s;
      }
    }
  }
}

}  // namespace

void rotary_forward(double* qkv, double theta, std::int64_t R, int T, int C, int H) {
  rotary_apply(qkv, theta, R, T, C, H, 1.0);
}

void rotary_backward(double* dqkv, double theta, std::int64_t R, int T, int C, int H) {
  rotary_apply(dqkv, theta, R, T, C, H, -1.0);
}

}  // namespace bertfit::ref
