// Tests of the task metrics against values computed by hand (the computation is written next
// to each expectation), including ties for Spearman and the degenerate cases of metrics.h.
#include "data/metrics.h"

#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"

namespace bertfit {
namespace {

// preds [1,0,1,1,0] vs labels [1,0,0,1,1]: tp = 2 (rows 0,3), tn = 1 (row 1), fp = 1 (row 2),
// fn = 1 (row 4).
const std::vector<float> kPred = {1, 0, 1, 1, 0};
const std::vector<float> kLabel = {1, 0, 0, 1, 1};

TEST(Metrics, Accuracy) {
  EXPECT_DOUBLE_EQ(accuracy(kPred, kLabel), 3.0 / 5.0);  // rows 0, 1, 3 agree
  // Class ids are compared after rounding (predictions may come from float buffers).
  EXPECT_DOUBLE_EQ(accuracy(std::vector<float>{0.9999f, 2.0f}, std::vector<float>{1, 2}), 1.0);
}

TEST(Metrics, F1) {
  // F1 = 2 tp / (2 tp + fp + fn) = 4 / (4 + 1 + 1) = 2/3.
  EXPECT_DOUBLE_EQ(f1_binary(kPred, kLabel), 2.0 / 3.0);
  // No positives predicted nor present: 0 (sklearn's zero_division default).
  EXPECT_EQ(f1_binary(std::vector<float>{0, 0}, std::vector<float>{0, 0}), 0.0);
  // All positives predicted, half right: P = 1/2, R = 1, F1 = 2/3.
  EXPECT_DOUBLE_EQ(f1_binary(std::vector<float>{1, 1}, std::vector<float>{1, 0}), 2.0 / 3.0);
}

TEST(Metrics, Matthews) {
  // (tp tn - fp fn) / sqrt((tp+fp)(tp+fn)(tn+fp)(tn+fn)) = (2 - 1) / sqrt(3*3*2*2) = 1/6.
  EXPECT_NEAR(matthews_correlation(kPred, kLabel), 1.0 / 6.0, 1e-15);
  // Constant prediction: zero denominator -> 0 (sklearn).
  EXPECT_EQ(matthews_correlation(std::vector<float>{1, 1, 1}, std::vector<float>{1, 0, 1}), 0.0);
  // Perfect and inverted.
  EXPECT_DOUBLE_EQ(matthews_correlation(kLabel, kLabel), 1.0);
  std::vector<float> inverted = {0, 1, 1, 0, 0};
  EXPECT_DOUBLE_EQ(matthews_correlation(inverted, kLabel), -1.0);
  // Multiclass, preds [0,1,2,2] vs labels [0,1,1,2]: c = 3, s = 4, t = (1,2,1), p = (1,1,2),
  // t.p = 5, (c s - t.p) / sqrt((s^2 - p.p)(s^2 - t.t)) = (12 - 5) / sqrt(10 * 10) = 0.7.
  EXPECT_NEAR(matthews_correlation(std::vector<float>{0, 1, 2, 2}, std::vector<float>{0, 1, 1, 2}),
              0.7, 1e-15);
}

TEST(Metrics, Pearson) {
  // x = [1,2,3,4], y = [2,4,5,9]: dx = [-1.5,-.5,.5,1.5], dy = [-3,-1,0,4]; sxy = 11, sxx = 5,
  // syy = 26; r = 11 / sqrt(130).
  std::vector<float> x = {1, 2, 3, 4}, y = {2, 4, 5, 9};
  EXPECT_NEAR(pearson(x, y), 11.0 / std::sqrt(130.0), 1e-14);
  EXPECT_NEAR(pearson(x, std::vector<float>{-1, -2, -3, -4}), -1.0, 1e-15);
  // Constant input: NaN, as scipy.stats.pearsonr.
  EXPECT_TRUE(std::isnan(pearson(x, std::vector<float>{3, 3, 3, 3})));
}

TEST(Metrics, SpearmanWithTies) {
  // average_ranks([3,1,3,3,2]): 1 -> 1, 2 -> 2, the three 3s share ranks 3,4,5 -> 4.
  EXPECT_EQ(average_ranks(std::vector<float>{3, 1, 3, 3, 2}), (std::vector<double>{4, 1, 4, 4, 2}));
  // x = [1,2,2,3] -> ranks [1,2.5,2.5,4]; y = [1,3,2,4] -> ranks [1,3,2,4]. Both means 2.5:
  // dx = [-1.5,0,0,1.5], dy = [-1.5,.5,-.5,1.5]; sxy = 4.5, sxx = 4.5, syy = 5;
  // rho = 4.5 / sqrt(22.5) = 3 / sqrt(10).
  EXPECT_NEAR(spearman(std::vector<float>{1, 2, 2, 3}, std::vector<float>{1, 3, 2, 4}),
              3.0 / std::sqrt(10.0), 1e-14);
  // Monotonic but nonlinear: rho = 1 while Pearson < 1.
  std::vector<float> x = {1, 2, 3, 4, 5}, y = {1, 4, 9, 16, 100};
  EXPECT_NEAR(spearman(x, y), 1.0, 1e-15);
  EXPECT_LT(pearson(x, y), 0.99);
  EXPECT_TRUE(std::isnan(spearman(x, std::vector<float>{2, 2, 2, 2, 2})));
}

TEST(Metrics, TaskMetricsOrderAndCombinedScore) {
  auto m = compute_task_metrics({"accuracy", "f1"}, kPred, kLabel);
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0].first, "accuracy");
  EXPECT_EQ(m[1].first, "f1");
  EXPECT_EQ(m[2].first, "combined_score");
  EXPECT_DOUBLE_EQ(m[2].second, (0.6 + 2.0 / 3.0) / 2);
  auto single = compute_task_metrics({"matthews_correlation"}, kPred, kLabel);
  ASSERT_EQ(single.size(), 1u);  // no combined score for a single metric
  EXPECT_NEAR(single[0].second, 1.0 / 6.0, 1e-15);
  auto reg = compute_task_metrics({"pearson", "spearmanr"}, std::vector<float>{1, 2, 3, 4},
                                  std::vector<float>{2, 4, 5, 9});
  EXPECT_EQ(reg[1].first, "spearmanr");
  EXPECT_NEAR(reg[1].second, 1.0, 1e-15);  // ranks are equal
  EXPECT_THROW(compute_task_metrics({"bleu"}, kPred, kLabel), Error);
  EXPECT_TRUE(std::isnan(accuracy(std::vector<float>{}, std::vector<float>{})));
  EXPECT_TRUE(is_known_metric("spearmanr"));
  EXPECT_FALSE(is_known_metric("spearman"));
}

// Values as scikit-learn gives them for indicator matrices:
//   f1_score(y, p, average="micro") = 2·tp / (2·tp + fp + fn) over all cells,
//   f1_score(y, p, average="macro") = mean of per-label F1 (0 for a label never true nor
//   predicted), accuracy_score(y, p) = fraction of rows equal in every label.
TEST(MultiLabelMetrics, KnownValues) {
  const std::vector<float> p = {1, 0, 1, 0, 1, 0, 0, 0, 0};
  const std::vector<float> y = {1, 0, 0, 0, 1, 1, 0, 0, 0};
  // label 0: tp 1 -> F1 1; label 1: tp 1 -> 1; label 2: fp 1, fn 1 -> 0. Row 2 matches.
  EXPECT_DOUBLE_EQ(f1_micro(p, y, 3), 4.0 / 6.0);
  EXPECT_DOUBLE_EQ(f1_macro(p, y, 3), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(subset_accuracy(p, y, 3), 1.0 / 3.0);
  auto all = multi_label_metrics(p, y, 3);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].first, "f1_micro");
  EXPECT_EQ(all[2].first, "subset_accuracy");
  // No positives anywhere: F1 0 (zero_division=0), every row matches.
  const std::vector<float> zeros(6, 0.0f);
  EXPECT_EQ(f1_micro(zeros, zeros, 2), 0.0);
  EXPECT_EQ(subset_accuracy(zeros, zeros, 2), 1.0);
  EXPECT_TRUE(std::isnan(f1_macro({}, {}, 2)));
}

}  // namespace
}  // namespace bertfit
