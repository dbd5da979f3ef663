// The training loss's options from --label-smoothing-factor and --class-weights: checked
// against the task (single-label classification only, one weight per label), "balanced"
// computed from the training labels, and logged. Also the weight a step's sample carries, for
// splitting a weighted mean over micro-batches and ranks (see class_weight_share).
#pragma once

#include <cstdint>
#include <vector>

#include "data/batch.h"
#include "model/bert.h"
#include "task/dataset.h"
#include "train/options.h"

namespace bertfit {

// Throws Error (one line naming the flag) for smoothing or weights on a regression or
// multi-label task, a weight count other than the number of labels K, or "balanced" with a
// class that has no training example. Logs the weights used.
LossOptions make_loss_options(const TrainOptions& options, const TaskInfo& task, int num_labels,
                              const std::vector<EncodedExample>& train);

// sklearn's compute_class_weight('balanced'): n / (K · count of class c), from the labels
// (class ids) of the training examples. Throws Error naming a class without examples.
std::vector<double> balanced_class_weights(const std::vector<EncodedExample>& train,
                                           const TaskInfo& task, int num_labels);

// The weight of a training example in the loss's weighted mean: its class's weight, or 1
// without class weights.
inline double sample_weight(const LossOptions& loss, const EncodedExample& example) {
  return loss.class_weights.empty() ? 1.0 : loss.class_weights[static_cast<int>(example.label)];
}

}  // namespace bertfit
