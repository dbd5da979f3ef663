// The loss of rows of logits for the config's problem type, as transformers takes it: the piece
// every head's loss (Head::loss, model/head.h) uses on the rows it has labels for. Single-label
// classification takes the LossOptions (train's --label-smoothing-factor and --class-weights).
#pragma once

#include <vector>

#include "model/config.h"

namespace bertfit {

// A token's label that no loss reads (transformers' ignore_index: special tokens, a word's later
// sub-tokens, padding).
inline constexpr float kIgnoredLabel = -100.0f;

// How single-label classification's cross-entropy is taken (train's --label-smoothing-factor
// and --class-weights), as torch.nn.CrossEntropyLoss(weight, label_smoothing): the default is
// the plain mean cross-entropy. Regression and multi-label losses take none of it.
struct LossOptions {
  double label_smoothing = 0.0;
  std::vector<double> class_weights;  // (K), or empty: every class weighs 1

  bool plain() const { return label_smoothing == 0.0 && class_weights.empty(); }
};

// The loss of R rows of logits (R,K) against their labels, with probs (R,K) (classification) and
// dlogits (R,K) = scale · d loss / d logits written, by the config's problem type:
// single-label, labels (R) class ids as floats, mean cross-entropy (with class weights the mean
// is weighted: Σ w[y]·loss / Σ w[y]); regression, labels (R) targets, mean squared error (K = 1);
// multi-label, labels (R,K) multi-hot rows, binary cross-entropy on logits averaged over R·K.
double rows_loss(const ModelConfig& c, const LossOptions& options, const float* logits,
                 float* probs, float* dlogits, const float* labels, int R, float scale);

}  // namespace bertfit
