// The best evaluation and early stopping (see best_model.h).
#include "train/best_model.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace bertfit {

BestTracker::BestTracker(const BestModelOptions& o, const std::vector<std::string>& metric_names)
    : patience_(o.patience), threshold_(o.threshold) {
  const std::string bare = o.metric.rfind("eval_", 0) == 0 ? o.metric.substr(5) : o.metric;
  if (bare != "loss" &&
      std::find(metric_names.begin(), metric_names.end(), bare) == metric_names.end()) {
    std::string known = "loss";
    for (const std::string& name : metric_names) known += ", " + name;
    throw_error("--metric-for-best-model ", o.metric,
                ": the evaluation reports no such metric; it reports ", known);
  }
  key_ = "eval_" + bare;
  greater_ = o.greater_is_better.value_or(bare != "loss");
}

bool BestTracker::better(double value, double than) const {
  return greater_ ? value > than : value < than;  // false for NaN either way
}

bool BestTracker::offer(std::int64_t step, const nlohmann::json& record) {
  const nlohmann::json& v = record.contains(key_) ? record[key_] : nlohmann::json();
  // A NaN metric is written to JSON as null.
  const double value = v.is_number() ? v.get<double>() : std::nan("");
  if (!best_step_ || (better(value, best_value_) && std::abs(value - best_value_) > threshold_)) {
    stale_ = 0;
  } else {
    ++stale_;
  }
  if (best_step_ && !better(value, best_value_)) return false;
  if (!best_step_ && std::isnan(value)) return false;
  best_step_ = step;
  best_value_ = value;
  best_record_ = record;
  return true;
}

bool BestTracker::should_stop() const { return patience_ > 0 && stale_ >= patience_; }

nlohmann::json BestTracker::to_json() const {
  nlohmann::json j{
      {"metric", key_}, {"greater_is_better", greater_}, {"evals_without_improvement", stale_}};
  if (best_step_) {
    j["step"] = *best_step_;
    j["value"] = best_value_;
    j["record"] = best_record_;
  }
  return j;
}

void BestTracker::restore(const nlohmann::json& saved) {
  if (!saved.is_object()) return;
  if (saved.value("metric", key_) != key_ ||
      saved.value("greater_is_better", greater_) != greater_) {
    throw_error(
        "--resume: the checkpoint chose its best model by ", saved.value("metric", ""),
        saved.value("greater_is_better", false) ? " (greater is better)" : " (lower is better)",
        ", not by ", key_, greater_ ? " (greater is better)" : " (lower is better)",
        "; resume with the same --metric-for-best-model and --greater-is-better");
  }
  stale_ = saved.value("evals_without_improvement", std::int64_t{0});
  if (saved.contains("step")) {
    best_step_ = saved["step"].get<std::int64_t>();
    best_value_ = saved["value"].get<double>();
    best_record_ = saved.value("record", nlohmann::json::object());
  }
}

}  // namespace bertfit
