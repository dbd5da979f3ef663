// Task metrics (see metrics.h). Everything is accumulated in double.
#include "data/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "base/check.h"
#include "base/error.h"

namespace bertfit {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

long long class_id(float v) { return std::llround(v); }

void check_sizes(std::span<const float> a, std::span<const float> b) {
  CHECK(a.size() == b.size(), "metric inputs differ in length: ", a.size(), " vs ", b.size());
}

}  // namespace

double accuracy(std::span<const float> predictions, std::span<const float> labels) {
  check_sizes(predictions, labels);
  if (labels.empty()) return kNaN;
  std::size_t correct = 0;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    correct += class_id(predictions[i]) == class_id(labels[i]);
  }
  return static_cast<double>(correct) / static_cast<double>(labels.size());
}

double f1_binary(std::span<const float> predictions, std::span<const float> labels) {
  check_sizes(predictions, labels);
  if (labels.empty()) return kNaN;
  double tp = 0, fp = 0, fn = 0;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    bool p = class_id(predictions[i]) == 1, y = class_id(labels[i]) == 1;
    tp += p && y;
    fp += p && !y;
    fn += !p && y;
  }
  // F1 = 2PR/(P+R) = 2tp / (2tp + fp + fn); 0 when there are no positives at all.
  double denominator = 2 * tp + fp + fn;
  return denominator == 0 ? 0.0 : 2 * tp / denominator;
}

double matthews_correlation(std::span<const float> predictions, std::span<const float> labels) {
  check_sizes(predictions, labels);
  if (labels.empty()) return kNaN;
  // With confusion matrix C (rows true, columns predicted), t = row sums, p = column sums,
  // c = trace, s = n:  MCC = (c s - t.p) / sqrt((s^2 - p.p)(s^2 - t.t)).
  std::map<long long, double> t, p;
  double c = 0, s = static_cast<double>(labels.size());
  for (std::size_t i = 0; i < labels.size(); ++i) {
    long long yp = class_id(predictions[i]), yt = class_id(labels[i]);
    t[yt] += 1;
    p[yp] += 1;
    c += yp == yt;
  }
  double tp_dot = 0, pp = 0, tt = 0;
  for (const auto& [k, v] : t) {
    tt += v * v;
    auto it = p.find(k);
    if (it != p.end()) tp_dot += v * it->second;
  }
  for (const auto& [k, v] : p) pp += v * v;
  double cov_ytyp = c * s - tp_dot, cov_ypyp = s * s - pp, cov_ytyt = s * s - tt;
  if (cov_ypyp * cov_ytyt == 0) return 0.0;
  return cov_ytyp / std::sqrt(cov_ytyt * cov_ypyp);
}

namespace {
double pearson_double(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  double mx = std::accumulate(x.begin(), x.end(), 0.0) / n;
  double my = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    double dx = x[i] - mx, dy = y[i] - my;
    sxy += dx * dy;
    sxx += dx * dx;
    syy += dy * dy;
  }
  if (sxx == 0 || syy == 0) return kNaN;
  double r = sxy / std::sqrt(sxx * syy);
  return std::clamp(r, -1.0, 1.0);
}
}  // namespace

double pearson(std::span<const float> x, std::span<const float> y) {
  check_sizes(x, y);
  if (x.empty()) return kNaN;
  return pearson_double(std::vector<double>(x.begin(), x.end()),
                        std::vector<double>(y.begin(), y.end()));
}

std::vector<double> average_ranks(std::span<const float> values) {
  std::vector<std::size_t> order(values.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return values[a] < values[b]; });
  std::vector<double> ranks(values.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j + 1 < order.size() && values[order[j + 1]] == values[order[i]]) ++j;
    // Positions i..j (0-based) share the value: average 1-based rank ((i+1) + (j+1)) / 2.
    double rank = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;
    for (std::size_t k = i; k <= j; ++k) ranks[order[k]] = rank;
    i = j + 1;
  }
  return ranks;
}

double spearman(std::span<const float> x, std::span<const float> y) {
  check_sizes(x, y);
  if (x.empty()) return kNaN;
  return pearson_double(average_ranks(x), average_ranks(y));
}

bool is_known_metric(const std::string& name) {
  return name == "accuracy" || name == "f1" || name == "matthews_correlation" ||
         name == "pearson" || name == "spearmanr";
}

std::vector<std::pair<std::string, double>> compute_task_metrics(
    const std::vector<std::string>& names, std::span<const float> predictions,
    std::span<const float> labels) {
  std::vector<std::pair<std::string, double>> out;
  for (const auto& name : names) {
    double value;
    if (name == "accuracy") {
      value = accuracy(predictions, labels);
    } else if (name == "f1") {
      value = f1_binary(predictions, labels);
    } else if (name == "matthews_correlation") {
      value = matthews_correlation(predictions, labels);
    } else if (name == "pearson") {
      value = pearson(predictions, labels);
    } else if (name == "spearmanr") {
      value = spearman(predictions, labels);
    } else {
      throw_error("unknown metric '", name,
                  "'; known: accuracy, f1, matthews_correlation, pearson, spearmanr");
    }
    out.emplace_back(name, value);
  }
  if (out.size() > 1) {
    double sum = 0;
    for (const auto& [name, value] : out) sum += value;
    out.emplace_back("combined_score", sum / static_cast<double>(out.size()));
  }
  return out;
}

namespace {

struct Counts {
  double tp = 0, fp = 0, fn = 0;
  double f1() const { return tp == 0 ? 0.0 : 2 * tp / (2 * tp + fp + fn); }
};

Counts count_label(std::span<const float> p, std::span<const float> y, int K, int k) {
  Counts c;
  for (std::size_t i = static_cast<std::size_t>(k); i < p.size();
       i += static_cast<std::size_t>(K)) {
    const bool pred = p[i] > 0.5f, truth = y[i] > 0.5f;
    c.tp += pred && truth;
    c.fp += pred && !truth;
    c.fn += !pred && truth;
  }
  return c;
}

}  // namespace

double f1_micro(std::span<const float> p, std::span<const float> y, int K) {
  CHECK(p.size() == y.size() && K > 0 && p.size() % K == 0, "shapes differ");
  if (p.empty()) return std::nan("");
  Counts total;
  for (int k = 0; k < K; ++k) {
    Counts c = count_label(p, y, K, k);
    total.tp += c.tp, total.fp += c.fp, total.fn += c.fn;
  }
  return total.f1();
}

double f1_macro(std::span<const float> p, std::span<const float> y, int K) {
  CHECK(p.size() == y.size() && K > 0 && p.size() % K == 0, "shapes differ");
  if (p.empty()) return std::nan("");
  double sum = 0;
  for (int k = 0; k < K; ++k) sum += count_label(p, y, K, k).f1();
  return sum / K;
}

double subset_accuracy(std::span<const float> p, std::span<const float> y, int K) {
  CHECK(p.size() == y.size() && K > 0 && p.size() % K == 0, "shapes differ");
  if (p.empty()) return std::nan("");
  const std::size_t n = p.size() / K;
  double exact = 0;
  for (std::size_t i = 0; i < n; ++i) {
    bool all = true;
    for (int k = 0; k < K; ++k) all = all && ((p[i * K + k] > 0.5f) == (y[i * K + k] > 0.5f));
    exact += all;
  }
  return exact / static_cast<double>(n);
}

std::vector<std::pair<std::string, double>> multi_label_metrics(std::span<const float> p,
                                                                std::span<const float> y, int K) {
  return {{"f1_micro", f1_micro(p, y, K)},
          {"f1_macro", f1_macro(p, y, K)},
          {"subset_accuracy", subset_accuracy(p, y, K)}};
}

}  // namespace bertfit
