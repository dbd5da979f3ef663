// BestTracker against Trainer 4.28's rules: the direction by metric, strict improvement,
// EarlyStoppingCallback's threshold compared with the previous best, NaN never best, the state
// through a checkpoint, and the errors a user can cause.
#include "train/best_model.h"

#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"

namespace bertfit {
namespace {

const std::vector<std::string> kMrpc = {"accuracy", "f1", "combined_score"};

nlohmann::json rec(const std::string& key, double v) {
  nlohmann::json j{{"eval_loss", 1.0}};
  if (std::isnan(v)) {
    j[key] = nullptr;  // how a NaN metric reaches metrics.jsonl
  } else {
    j[key] = v;
  }
  return j;
}

TEST(BestTracker, LossIsLowerIsBetterAndOtherMetricsHigher) {
  BestTracker loss({}, kMrpc);
  EXPECT_EQ(loss.key(), "eval_loss");
  EXPECT_FALSE(loss.greater_is_better());
  BestTracker f1({.metric = "eval_f1"}, kMrpc);
  EXPECT_EQ(f1.key(), "eval_f1");
  EXPECT_TRUE(f1.greater_is_better());
  BestTracker forced({.metric = "accuracy", .greater_is_better = false}, kMrpc);
  EXPECT_FALSE(forced.greater_is_better());
}

TEST(BestTracker, KeepsTheStrictlyBestStep) {
  BestTracker t({.metric = "accuracy"}, kMrpc);
  EXPECT_TRUE(t.offer(10, rec("eval_accuracy", 0.6)));
  EXPECT_TRUE(t.offer(20, rec("eval_accuracy", 0.8)));
  EXPECT_FALSE(t.offer(30, rec("eval_accuracy", 0.8)));  // equal is not better
  EXPECT_FALSE(t.offer(40, rec("eval_accuracy", 0.7)));
  EXPECT_EQ(t.best_step(), 20);
  EXPECT_DOUBLE_EQ(t.best_value(), 0.8);
  EXPECT_DOUBLE_EQ(t.best_record()["eval_accuracy"].get<double>(), 0.8);
}

TEST(BestTracker, StopsAfterPatienceEvaluationsWithoutImprovement) {
  BestTracker t({.metric = "loss", .patience = 2}, kMrpc);
  t.offer(1, rec("eval_loss", 1.0));
  EXPECT_FALSE(t.should_stop());
  t.offer(2, rec("eval_loss", 1.1));
  EXPECT_FALSE(t.should_stop());
  t.offer(3, rec("eval_loss", 0.9));  // an improvement resets the count
  EXPECT_EQ(t.evals_without_improvement(), 0);
  t.offer(4, rec("eval_loss", 0.95));
  EXPECT_FALSE(t.should_stop());
  t.offer(5, rec("eval_loss", 0.9));
  EXPECT_TRUE(t.should_stop());
  EXPECT_EQ(t.best_step(), 3);
}

// EarlyStoppingCallback.check_metric_value: an improvement by no more than the threshold counts
// as none, but the best still moves to it (Trainer's _save_checkpoint), and the next evaluation
// is compared with that new best.
TEST(BestTracker, GainsWithinTheThresholdMoveTheBestButCountAsStale) {
  BestTracker t({.metric = "accuracy", .patience = 2, .threshold = 0.05}, kMrpc);
  t.offer(1, rec("eval_accuracy", 0.70));
  EXPECT_TRUE(t.offer(2, rec("eval_accuracy", 0.74)));  // +0.04: best, yet stale
  EXPECT_EQ(t.evals_without_improvement(), 1);
  EXPECT_TRUE(t.offer(3, rec("eval_accuracy", 0.78)));  // +0.04 over 0.74 again
  EXPECT_TRUE(t.should_stop());
  EXPECT_EQ(t.best_step(), 3);
}

TEST(BestTracker, NanIsNeverBest) {
  BestTracker t({.metric = "pearson"}, {"pearson", "spearmanr", "combined_score"});
  EXPECT_FALSE(t.offer(1, rec("eval_pearson", std::nan(""))));
  EXPECT_FALSE(t.best_step().has_value());
  EXPECT_TRUE(t.offer(2, rec("eval_pearson", 0.1)));
  EXPECT_FALSE(t.offer(3, rec("eval_pearson", std::nan(""))));
  EXPECT_EQ(t.best_step(), 2);
}

TEST(BestTracker, StateSurvivesTheCheckpoint) {
  BestTracker a({.metric = "f1", .patience = 3}, kMrpc);
  a.offer(5, rec("eval_f1", 0.5));
  a.offer(10, rec("eval_f1", 0.4));
  BestTracker b({.metric = "eval_f1", .patience = 3}, kMrpc);
  b.restore(nlohmann::json::parse(a.to_json().dump()));
  EXPECT_EQ(b.best_step(), 5);
  EXPECT_EQ(b.evals_without_improvement(), 1);
  b.offer(15, rec("eval_f1", 0.45));
  b.offer(20, rec("eval_f1", 0.45));
  EXPECT_TRUE(b.should_stop());
}

TEST(BestTracker, UserErrorsNameTheFlag) {
  try {
    BestTracker t({.metric = "pearson"}, kMrpc);
    FAIL() << "an unknown metric was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "--metric-for-best-model pearson: the evaluation reports no such metric; it "
              "reports loss, accuracy, f1, combined_score");
  }
  BestTracker f1({.metric = "f1"}, kMrpc);
  BestTracker acc({.metric = "accuracy"}, kMrpc);
  EXPECT_THROW(acc.restore(f1.to_json()), Error);
}

}  // namespace
}  // namespace bertfit
