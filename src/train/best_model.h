// The best evaluation of a run and early stopping, as Hugging Face Trainer 4.28 decides them
// (--metric-for-best-model, --greater-is-better, EarlyStoppingCallback's patience and
// threshold).
//
// Every evaluation of the first dev split is offered to the tracker in turn:
//   - early stopping compares it with the best value BEFORE it: it counts as an improvement
//     only when better by more than the threshold (strictly, in the metric's direction); the
//     run stops after `patience` evaluations in a row without one;
//   - the best value then becomes it whenever it is strictly better at all (a gain below the
//     threshold still moves the best, as in Trainer, where the callback runs before
//     _save_checkpoint updates state.best_metric).
// A NaN value (e.g. Pearson of a constant prediction) is never better.
//
// The state travels in the checkpoint (trainer_state.json "best"), so a resumed run keeps its
// best step and its count of evaluations without improvement (Trainer 4.28 loses the latter).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace bertfit {

struct BestModelOptions {
  std::string metric = "loss";  // a name score_logits reports, or "loss"; "eval_" optional
  std::optional<bool> greater_is_better =
      std::nullopt;           // unset: false for the loss, true for other metrics
  std::int64_t patience = 0;  // 0: no early stopping
  double threshold = 0;
};

class BestTracker {
 public:
  // `metric_names`: what the task's evaluation reports besides the loss (task_metric_names).
  // Error naming --metric-for-best-model when options.metric is not among them.
  BestTracker(const BestModelOptions& options, const std::vector<std::string>& metric_names);

  // The key in an evaluation record: "eval_loss", "eval_accuracy", ...
  const std::string& key() const { return key_; }
  bool greater_is_better() const { return greater_; }

  // Offers the evaluation record (eval_* keys) of `step`; returns true when it is the new best.
  bool offer(std::int64_t step, const nlohmann::json& eval_record);
  // Early stopping is on and `patience` evaluations in a row brought no improvement.
  bool should_stop() const;

  std::optional<std::int64_t> best_step() const { return best_step_; }
  double best_value() const { return best_value_; }
  const nlohmann::json& best_record() const { return best_record_; }
  std::int64_t evals_without_improvement() const { return stale_; }

  // For the checkpoint, and back; restore() refuses a state kept for another metric.
  nlohmann::json to_json() const;
  void restore(const nlohmann::json& saved);

 private:
  bool better(double value, double than) const;

  std::string key_;
  bool greater_;
  std::int64_t patience_;
  double threshold_;
  std::optional<std::int64_t> best_step_;
  double best_value_ = 0;
  nlohmann::json best_record_;
  std::int64_t stale_ = 0;
};

}  // namespace bertfit
