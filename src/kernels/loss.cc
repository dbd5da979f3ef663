// Mean cross-entropy (log-sum-exp in double per row), binary cross-entropy on logits and mean
// squared error, with their
// gradients scaled by `scale` and divided by the batch size as PyTorch's mean reduction.
#include "kernels/loss.h"

#include <cmath>

#include "base/check.h"

namespace bertfit {

double cross_entropy_forward(float* probs, const float* logits, const std::int32_t* labels, int B,
                             int K) {
  CHECK(B > 0 && K > 0, "B = ", B, ", K = ", K);
  double total = 0.0;
  for (int b = 0; b < B; ++b) {
    CHECK(labels[b] >= 0 && labels[b] < K, "label ", labels[b], " of row ", b, " out of range [0, ",
          K, ")");
    const float* z = logits + static_cast<std::int64_t>(b) * K;
    double mx = z[0];
    for (int k = 1; k < K; ++k) mx = std::fmax(mx, static_cast<double>(z[k]));
    double sum = 0.0;
    for (int k = 0; k < K; ++k) sum += std::exp(z[k] - mx);
    const double lse = mx + std::log(sum);
    float* p = probs + static_cast<std::int64_t>(b) * K;
    for (int k = 0; k < K; ++k) p[k] = static_cast<float>(std::exp(z[k] - lse));
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
