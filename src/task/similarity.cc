// Scored-pair evaluation of embeddings (see similarity.h).
#include "task/similarity.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>

#include "base/check.h"
#include "base/error.h"
#include "model/contrastive.h"

namespace bertfit {
namespace {

// 1-based ranks, tied values at their mean rank (scipy.stats.rankdata's "average").
std::vector<double> ranks(const std::vector<double>& x) {
  std::vector<std::size_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return x[a] < x[b]; });
  std::vector<double> r(x.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j + 1 < order.size() && x[order[j + 1]] == x[order[i]]) ++j;
    const double mean = (static_cast<double>(i) + static_cast<double>(j)) / 2 + 1;
    for (std::size_t k = i; k <= j; ++k) r[order[k]] = mean;
    i = j + 1;
  }
  return r;
}

}  // namespace

std::vector<std::string> similarity_metric_names() {
  return {"spearman_cosine",    "pearson_cosine",    "spearman_manhattan", "pearson_manhattan",
          "spearman_euclidean", "pearson_euclidean", "spearman_dot",       "pearson_dot"};
}

double pearson(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / n;
  const double my = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  if (sxx == 0 || syy == 0) return std::nan("");
  return sxy / std::sqrt(sxx * syy);
}

double spearman(const std::vector<double>& x, const std::vector<double>& y) {
  return pearson(ranks(x), ranks(y));
}

std::vector<std::pair<std::string, double>> similarity_metrics(const std::vector<float>& embeddings,
                                                               int D,
                                                               const std::vector<double>& scores) {
  const std::size_t n = scores.size();
  if (n < 2) throw_error("similarity evaluation needs at least two scored pairs, not ", n);
  if (std::all_of(scores.begin(), scores.end(), [&](double s) { return s == scores[0]; })) {
    throw_error("similarity evaluation: every pair has the score ", scores[0],
                ", so no ranking of the pairs can be scored against them");
  }
  CHECK(embeddings.size() == 2 * n * static_cast<std::size_t>(D), "embeddings ", embeddings.size(),
        " for ", n, " pairs of ", D);
  std::vector<double> cosine(n), manhattan(n), euclidean(n), dots(n);
  for (std::size_t i = 0; i < n; ++i) {
    const float* a = embeddings.data() + i * D;
    const float* b = embeddings.data() + (n + i) * D;
    cosine[i] = cosine_similarity(a, b, D);
    double l1 = 0, l2 = 0, d = 0;
    for (int k = 0; k < D; ++k) {
      const double diff = double{a[k]} - b[k];
      l1 += std::abs(diff);
      l2 += diff * diff;
      d += double{a[k]} * b[k];
    }
    manhattan[i] = -l1;
    euclidean[i] = -std::sqrt(l2);
    dots[i] = d;
  }
  std::vector<std::pair<std::string, double>> m;
  for (const auto& [name, values] :
       {std::pair{"cosine", &cosine}, std::pair{"manhattan", &manhattan},
        std::pair{"euclidean", &euclidean}, std::pair{"dot", &dots}}) {
    m.emplace_back(std::string("spearman_") + name, spearman(*values, scores));
    m.emplace_back(std::string("pearson_") + name, pearson(*values, scores));
  }
  return m;
}

}  // namespace bertfit
