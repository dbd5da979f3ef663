// Task metrics with the semantics of HF's `glue` metric (scikit-learn and scipy underneath):
// accuracy, binary F1 (positive class 1), Matthews correlation, Pearson and Spearman.
// Predictions and labels are floats: class ids (compared after rounding) for classification,
// scores for regression.
//
// Edge cases, chosen as the reference libraries behave:
//   f1                    no true and no predicted positives -> 0 (sklearn zero_division=0 default)
//   matthews_correlation  zero denominator (a constant prediction or label column) -> 0 (sklearn)
//   pearson, spearmanr    a constant input (zero variance) -> NaN (scipy returns NaN and warns)
//   empty inputs          -> NaN for every metric.
#pragma once

#include <span>
#include <string>
#include <utility>
#include <vector>

namespace bertfit {

double accuracy(std::span<const float> predictions, std::span<const float> labels);
double f1_binary(std::span<const float> predictions, std::span<const float> labels);
// Multiclass form (Gorodkin's R_K, as sklearn's matthews_corrcoef); the binary MCC for 2 classes.
double matthews_correlation(std::span<const float> predictions, std::span<const float> labels);
double pearson(std::span<const float> x, std::span<const float> y);
// Pearson correlation of the ranks; tied values get the average of their ranks.
double spearman(std::span<const float> x, std::span<const float> y);
// 1-based ranks with ties averaged (scipy.stats.rankdata method="average").
std::vector<double> average_ranks(std::span<const float> values);

// Multi-label: predictions and labels are (n,K) rows of 0/1, row-major. As scikit-learn's
// f1_score(average="micro" / "macro") and accuracy_score on label indicator matrices (subset
// accuracy: a row counts only when every label matches); a label with no true and no
// predicted positives has F1 0 in the macro mean (zero_division=0). Empty inputs -> NaN.
double f1_micro(std::span<const float> predictions, std::span<const float> labels, int K);
double f1_macro(std::span<const float> predictions, std::span<const float> labels, int K);
double subset_accuracy(std::span<const float> predictions, std::span<const float> labels, int K);
std::vector<std::pair<std::string, double>> multi_label_metrics(std::span<const float> predictions,
                                                                std::span<const float> labels,
                                                                int K);

// The names compute_task_metrics knows: accuracy, f1, matthews_correlation, pearson, spearmanr.
bool is_known_metric(const std::string& name);

// Computes the named metrics in the given order; when more than one is named, appends
// "combined_score", their mean (as HF run_glue does). Error for an unknown name.
std::vector<std::pair<std::string, double>> compute_task_metrics(
    const std::vector<std::string>& names, std::span<const float> predictions,
    std::span<const float> labels);

}  // namespace bertfit
