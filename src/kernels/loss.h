// Classification and regression losses, averaged over the batch as PyTorch's defaults.
#pragma once

#include <cstdint>

namespace bertfit {

// logits: (B,K), labels: (B) in [0,K). Returns mean cross-entropy; probs (B,K) = softmax.
// Computed with a max-subtracted log-sum-exp in double per row.
double cross_entropy_forward(float* probs, const float* logits, const std::int32_t* labels, int B,
                             int K);
// dlogits (B,K) += scale · (probs - onehot(labels)) / B. scale multiplies the mean loss
// (e.g. 1/accumulation steps).
void cross_entropy_backward(float* dlogits, const float* probs, const std::int32_t* labels, int B,
                            int K, float scale);

// Single-label cross-entropy with class weights and label smoothing, as
// torch.nn.CrossEntropyLoss(weight=w, label_smoothing=eps) with mean reduction:
//   loss = Σ_b [(1-eps)·w[y_b]·(lse_b - z_{b,y_b}) + eps/K·Σ_k w[k]·(lse_b - z_{b,k})] / Σ_b w[y_b]
// weights: (K) positive, or nullptr for all 1 (then it is Trainer's LabelSmoother, and with
// eps = 0 cross_entropy_forward). logits: (B,K), labels: (B) in [0,K); probs (B,K) = softmax.
// Computed in double per row as cross_entropy_forward.
double weighted_cross_entropy_forward(float* probs, const float* logits, const std::int32_t* labels,
                                      int B, int K, const double* weights, double eps);
// dlogits (B,K) += scale · [(1-eps)·w[y_b]·(p - onehot(y_b)) + eps/K·(Σ_k w[k]·p - w)] / Σ_b w[y_b]
void weighted_cross_entropy_backward(float* dlogits, const float* probs, const std::int32_t* labels,
                                     int B, int K, const double* weights, double eps, float scale);

// pred, target: (B). Returns mean((pred - target)^2).
double mse_forward(const float* pred, const float* target, int B);
// dpred += scale · 2 (pred - target) / B.
void mse_backward(float* dpred, const float* pred, const float* target, int B, float scale);

// Multi-label classification (PyTorch's BCEWithLogitsLoss, mean over all B·K entries, as
// transformers for problem_type multi_label_classification). logits, targets: (B,K), targets
// in [0,1] (multi-hot rows). Returns mean(max(z,0) - z·y + log(1 + exp(-|z|))), computed in
// double; probs (B,K) = sigmoid(z).
double bce_with_logits_forward(float* probs, const float* logits, const float* targets, int B,
                               int K);
// dlogits (B,K) += scale · (probs - targets) / (B·K).
void bce_with_logits_backward(float* dlogits, const float* probs, const float* targets, int B,
                              int K, float scale);

}  // namespace bertfit
