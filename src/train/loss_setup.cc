// The training loss's options (see loss_setup.h).
#include "train/loss_setup.h"

#include "base/error.h"
#include "base/log.h"

namespace bertfit {
namespace {

std::string class_name(const TaskInfo& task, int c) {
  if (c < static_cast<int>(task.label_names.size())) return cat("'", task.label_names[c], "'");
  return cat(c);
}

}  // namespace

std::vector<double> balanced_class_weights(const std::vector<EncodedExample>& train,
                                           const TaskInfo& task, int num_labels) {
  std::vector<std::int64_t> count(num_labels, 0);
  for (const EncodedExample& e : train) ++count[static_cast<int>(e.label)];
  std::vector<double> weights(num_labels);
  const double n = static_cast<double>(train.size());
  for (int c = 0; c < num_labels; ++c) {
    if (count[c] == 0) {
      throw_error("--class-weights balanced: class ", class_name(task, c), " (id ", c,
                  ") has no training examples");
    }
    weights[c] = n / (static_cast<double>(num_labels) * static_cast<double>(count[c]));
  }
  return weights;
}

LossOptions make_loss_options(const TrainOptions& o, const TaskInfo& task, int num_labels,
                              const std::vector<EncodedExample>& train) {
  LossOptions loss;
  const bool weighted = o.class_weights.kind != ClassWeights::Kind::kNone;
  if (o.label_smoothing == 0.0 && !weighted) return loss;
  if (task.problem != ProblemType::kSingleLabel) {
    const char* what = task.regression() ? "regression" : "multi-label classification";
    throw_error(o.label_smoothing != 0.0 ? "--label-smoothing-factor" : "--class-weights",
                " applies to single-label classification only, not to ", what);
  }
  loss.label_smoothing = o.label_smoothing;
  if (o.class_weights.kind == ClassWeights::Kind::kGiven) {
    if (static_cast<int>(o.class_weights.given.size()) != num_labels) {
      throw_error("--class-weights gives ", o.class_weights.given.size(),
                  " weights but the model has K = ", num_labels, " labels");
    }
    loss.class_weights = o.class_weights.given;
  } else if (o.class_weights.kind == ClassWeights::Kind::kBalanced) {
    loss.class_weights = balanced_class_weights(train, task, num_labels);
  }
  if (weighted) {
    std::string list;
    for (int c = 0; c < num_labels; ++c) {
      list += cat(c == 0 ? "" : ", ", class_name(task, c), " ", loss.class_weights[c]);
    }
    log_info("class weights (", class_weights_name(o.class_weights), "): ", list);
  }
  return loss;
}

}  // namespace bertfit
