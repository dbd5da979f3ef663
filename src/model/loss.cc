// The loss of rows of logits by problem type (see loss.h).
#include "model/loss.h"

#include <cstdint>
#include <cstring>

#include "base/check.h"
#include "kernels/kernels.h"

namespace bertfit {

double rows_loss(const ModelConfig& c, const LossOptions& o, const float* logits, float* probs,
                 float* dlogits, const float* labels, int R, float scale) {
  const int K = c.num_labels;
  std::memset(dlogits, 0, sizeof(float) * R * K);
  switch (c.problem()) {
    case ProblemType::kRegression: {
      CHECK(K == 1, "regression needs one output, got ", K);
      double l = mse_forward(logits, labels, R);
      mse_backward(dlogits, logits, labels, R, scale);
      return l;
    }
    case ProblemType::kMultiLabel: {
      double l = bce_with_logits_forward(probs, logits, labels, R, K);
      bce_with_logits_backward(dlogits, probs, labels, R, K, scale);
      return l;
    }
    case ProblemType::kSingleLabel:
      break;
  }
  std::vector<std::int32_t> ids(R);
  for (int r = 0; r < R; ++r) {
    ids[r] = static_cast<std::int32_t>(labels[r]);
    CHECK(ids[r] >= 0 && ids[r] < K, "label ", labels[r], " outside [0,", K, ")");
  }
  if (!o.plain()) {
    const double* weights = o.class_weights.empty() ? nullptr : o.class_weights.data();
    const double l =
        weighted_cross_entropy_forward(probs, logits, ids.data(), R, K, weights, o.label_smoothing);
    weighted_cross_entropy_backward(dlogits, probs, ids.data(), R, K, weights, o.label_smoothing,
                                    scale);
    return l;
  }
  double l = cross_entropy_forward(probs, logits, ids.data(), R, K);
  cross_entropy_backward(dlogits, probs, ids.data(), R, K, scale);
  return l;
}

}  // namespace bertfit
