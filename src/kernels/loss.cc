// Mean cross-entropy (log-sum-exp in double per row; also weighted and label-smoothed),
// binary cross-entropy on logits and mean squared error, with their gradients scaled by `scale`
// and divided by the batch size (the batch's total weight) as PyTorch's mean reduction.
#include "kernels/loss.h"

#include <cmath>

#include "base/check.h"

namespace bertfit {
namespace {

// p = softmax(z) over one row of K logits (log-sum-exp in double); returns the log-sum-exp.
double softmax_row(const float* z, int K, float* p) {
  double mx = z[0];
  for (int k = 1; k < K; ++k) mx = std::fmax(mx, static_cast<double>(z[k]));
  double sum = 0.0;
  for (int k = 0; k < K; ++k) sum += std::exp(z[k] - mx);
  const double lse = mx + std::log(sum);
  for (int k = 0; k < K; ++k) p[k] = static_cast<float>(std::exp(z[k] - lse));
  return lse;
}

}  // namespace

double cross_entropy_forward(float* probs, const float* logits, const std::int32_t* labels, int B,
                             int K) {
  CHECK(B > 0 && K > 0, "B = ", B, ", K = ", K);
  double total = 0.0;
  for (int b = 0; b < B; ++b) {
    CHECK(labels[b] >= 0 && labels[b] < K, "label ", labels[b], " of row ", b, " out of range [0, ",
          K, ")");
    const float* z = logits + static_cast<std::int64_t>(b) * K;
    const double lse = softmax_row(z, K, probs + static_cast<std::int64_t>(b) * K);
    total += lse - z[labels[b]];
  }
  return total / B;
}

void cross_entropy_backward(float* dlogits, const float* probs, const std::int32_t* labels, int B,
                            int K, float scale) {
  CHECK(B > 0 && K > 0, "B = ", B, ", K = ", K);
  const double s = static_cast<double>(scale) / B;
  for (int b = 0; b < B; ++b) {
    CHECK(labels[b] >= 0 && labels[b] < K, "label ", labels[b], " of row ", b, " out of range [0, ",
          K, ")");
    const float* p = probs + static_cast<std::int64_t>(b) * K;
    float* d = dlogits + static_cast<std::int64_t>(b) * K;
    for (int k = 0; k < K; ++k) {
      const double target = k == labels[b] ? 1.0 : 0.0;
      d[k] += static_cast<float>(s * (p[k] - target));
    }
  }
}

namespace {

double weight_of(const double* weights, int k) { return weights == nullptr ? 1.0 : weights[k]; }

// Σ_b w[y_b], the denominator of the weighted mean (B without weights).
double label_weight_sum(const std::int32_t* labels, int B, int K, const double* weights) {
  double total = 0.0;
  for (int b = 0; b < B; ++b) {
    CHECK(labels[b] >= 0 && labels[b] < K, "label ", labels[b], " of row ", b, " out of range [0, ",
          K, ")");
    total += weight_of(weights, labels[b]);
  }
  CHECK(total > 0, "the batch's class weights sum to ", total);
  return total;
}

}  // namespace

double weighted_cross_entropy_forward(float* probs, const float* logits, const std::int32_t* labels,
                                      int B, int K, const double* weights, double eps) {
  CHECK(B > 0 && K > 0, "B = ", B, ", K = ", K);
  const double denominator = label_weight_sum(labels, B, K, weights);
  double total = 0.0;
  for (int b = 0; b < B; ++b) {
    const float* z = logits + static_cast<std::int64_t>(b) * K;
    const double lse = softmax_row(z, K, probs + static_cast<std::int64_t>(b) * K);
    double smooth = 0.0;  // Σ_k w[k]·(-log p_k)
    for (int k = 0; k < K; ++k) {
      smooth += weight_of(weights, k) * (lse - z[k]);
    }
    const int y = labels[b];
    total += (1.0 - eps) * weight_of(weights, y) * (lse - z[y]) + eps / K * smooth;
  }
  return total / denominator;
}

void weighted_cross_entropy_backward(float* dlogits, const float* probs, const std::int32_t* labels,
                                     int B, int K, const double* weights, double eps, float scale) {
  CHECK(B > 0 && K > 0, "B = ", B, ", K = ", K);
  const double s = static_cast<double>(scale) / label_weight_sum(labels, B, K, weights);
  double weight_total = 0.0;  // Σ_k w[k]
  for (int k = 0; k < K; ++k) weight_total += weight_of(weights, k);
  for (int b = 0; b < B; ++b) {
    const float* p = probs + static_cast<std::int64_t>(b) * K;
    float* d = dlogits + static_cast<std::int64_t>(b) * K;
    const int y = labels[b];
    const double wy = (1.0 - eps) * weight_of(weights, y);
    for (int k = 0; k < K; ++k) {
      const double target = k == y ? 1.0 : 0.0;
      const double g =
          wy * (p[k] - target) + eps / K * (weight_total * p[k] - weight_of(weights, k));
      d[k] += static_cast<float>(s * g);
    }
  }
}

double mse_forward(const float* pred, const float* target, int B) {
  CHECK(B > 0, "B = ", B);
  double total = 0.0;
  for (int b = 0; b < B; ++b) {
    const double diff = static_cast<double>(pred[b]) - target[b];
    total += diff * diff;
  }
  return total / B;
}

void mse_backward(float* dpred, const float* pred, const float* target, int B, float scale) {
  CHECK(B > 0, "B = ", B);
  const double s = 2.0 * static_cast<double>(scale) / B;
  for (int b = 0; b < B; ++b) {
    dpred[b] += static_cast<float>(s * (static_cast<double>(pred[b]) - target[b]));
  }
}

double bce_with_logits_forward(float* probs, const float* logits, const float* targets, int B,
                               int K) {
  CHECK(B > 0 && K > 0, "B = ", B, ", K = ", K);
  const std::int64_t n = std::int64_t{B} * K;
  double total = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double z = logits[i], y = targets[i];
    // log(1 + exp(-|z|)) keeps both branches finite for any z.
    total += std::fmax(z, 0.0) - z * y + std::log1p(std::exp(-std::fabs(z)));
    probs[i] = static_cast<float>(1.0 / (1.0 + std::exp(-z)));
  }
  return total / static_cast<double>(n);
}

void bce_with_logits_backward(float* dlogits, const float* probs, const float* targets, int B,
                              int K, float scale) {
  CHECK(B > 0 && K > 0, "B = ", B, ", K = ", K);
  const std::int64_t n = std::int64_t{B} * K;
  const double s = static_cast<double>(scale) / static_cast<double>(n);
  for (std::int64_t i = 0; i < n; ++i) {
    dlogits[i] += static_cast<float>(s * (static_cast<double>(probs[i]) - targets[i]));
  }
}

}  // namespace bertfit
