// Retrieval metrics of embeddings (see retrieval.h).
#include "task/retrieval.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "base/parallel.h"

namespace bertfit {
namespace {

// InformationRetrievalEvaluator's default k lists (2.2.2 and v3 alike).
constexpr int kMrrAt = 10, kNdcgAt = 10, kMapAt = 100;
constexpr int kCutoffs[] = {1, 3, 5, 10};  // accuracy@k, precision@k, recall@k
static_assert(kMapAt == kRetrievalDepth);

std::vector<std::string> names_with(const std::string& prefix) {
  std::vector<std::string> names = {prefix + "ndcg@" + std::to_string(kNdcgAt),
                                    prefix + "mrr@" + std::to_string(kMrrAt),
                                    prefix + "map@" + std::to_string(kMapAt)};
  for (const char* kind : {"accuracy@", "precision@", "recall@"}) {
    for (int k : kCutoffs) names.push_back(prefix + kind + std::to_string(k));
  }
  return names;
}

// Σ_{i < n} 1 / log2(i + 2): the DCG of n relevant documents in the first n places.
double ideal_dcg(std::int64_t n) {
  double dcg = 0;
  for (std::int64_t i = 0; i < n; ++i) dcg += 1.0 / std::log2(static_cast<double>(i) + 2);
  return dcg;
}

// A query's ranked list against its relevant documents: the metrics in names_with's order.
std::vector<double> query_metrics(const std::vector<std::int64_t>& ranked,
                                  const std::vector<std::int64_t>& relevant) {
  const std::int64_t n_rel = static_cast<std::int64_t>(relevant.size());
  const std::int64_t depth = std::min<std::int64_t>(kRetrievalDepth, ranked.size());
  // hits_before[r]: relevant documents among the first r places.
  std::vector<std::int64_t> hits_before(depth + 1, 0);
  double dcg = 0, reciprocal_rank = 0, precision_sum = 0;
  for (std::int64_t r = 0; r < depth; ++r) {
    const bool hit = std::binary_search(relevant.begin(), relevant.end(), ranked[r]);
    hits_before[r + 1] = hits_before[r] + (hit ? 1 : 0);
    if (!hit) continue;
    if (r < kNdcgAt) dcg += 1.0 / std::log2(static_cast<double>(r) + 2);
    if (r < kMrrAt && reciprocal_rank == 0) reciprocal_rank = 1.0 / static_cast<double>(r + 1);
    if (r < kMapAt) precision_sum += static_cast<double>(hits_before[r + 1]) / (r + 1);
  }
  const auto hits_at = [&](int k) { return hits_before[std::min<std::int64_t>(k, depth)]; };
  std::vector<double> m = {
      dcg / ideal_dcg(std::min<std::int64_t>(n_rel, kNdcgAt)), reciprocal_rank,
      precision_sum / static_cast<double>(std::min<std::int64_t>(kMapAt, n_rel))};
  for (int k : kCutoffs) m.push_back(hits_at(k) > 0 ? 1.0 : 0.0);
  for (int k : kCutoffs) m.push_back(static_cast<double>(hits_at(k)) / k);
  for (int k : kCutoffs) m.push_back(static_cast<double>(hits_at(k)) / static_cast<double>(n_rel));
  return m;
}

}  // namespace

std::vector<std::string> retrieval_metric_names() {
  std::vector<std::string> names = names_with("cosine_"), dot = names_with("dot_");
  names.insert(names.end(), dot.begin(), dot.end());
  return names;
}

std::vector<std::int64_t> top_k(const std::vector<double>& scores, int k) {
  std::vector<std::int64_t> order(scores.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int64_t>(i);
  const auto first = [&](std::int64_t a, std::int64_t b) {
    return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
  };
  const std::size_t kept = std::min(order.size(), static_cast<std::size_t>(std::max(k, 0)));
  std::partial_sort(order.begin(), order.begin() + kept, order.end(), first);
  order.resize(kept);
  return order;
}

std::vector<std::pair<std::string, double>> ranking_metrics(
    const std::vector<std::vector<std::int64_t>>& ranked,
    const std::vector<std::vector<std::int64_t>>& relevant, const std::string& prefix) {
  CHECK(ranked.size() == relevant.size(), ranked.size(), " ranked lists for ", relevant.size(),
        " queries");
  const std::vector<std::string> names = names_with(prefix);
  std::vector<double> sums(names.size(), 0.0);
  std::int64_t scored = 0;
  for (std::size_t q = 0; q < ranked.size(); ++q) {
    if (relevant[q].empty()) continue;  // the evaluator drops queries without relevant documents
    const std::vector<double> m = query_metrics(ranked[q], relevant[q]);
    for (std::size_t i = 0; i < m.size(); ++i) sums[i] += m[i];
    ++scored;
  }
  CHECK(scored > 0, "no query has a relevant document");
  std::vector<std::pair<std::string, double>> out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    out.emplace_back(names[i], sums[i] / static_cast<double>(scored));
  }
  return out;
}

std::vector<std::pair<std::string, double>> retrieval_metrics(const std::vector<float>& embeddings,
                                                              int D, const RetrievalJudgements& j) {
  CHECK(D > 0 && static_cast<std::int64_t>(embeddings.size()) == (j.queries + j.corpus) * D,
        embeddings.size(), " embedding values for ", j.queries, " queries and ", j.corpus,
        " documents of width ", D);
  CHECK(static_cast<std::int64_t>(j.relevant.size()) == j.queries, j.relevant.size(),
        " relevance lists for ", j.queries, " queries");
  const std::int64_t rows = j.queries + j.corpus;
  const auto row = [&](std::int64_t r) { return embeddings.data() + r * D; };
  const auto dot = [&](std::int64_t a, std::int64_t b) {
    double s = 0;
    for (int c = 0; c < D; ++c) s += double{row(a)[c]} * double{row(b)[c]};
    return s;
  };
  // torch.nn.functional.normalize: v / max(‖v‖, 1e-12).
  std::vector<double> inv_norm(rows);
  for (std::int64_t r = 0; r < rows; ++r) inv_norm[r] = 1.0 / std::max(std::sqrt(dot(r, r)), 1e-12);
  // Each query's dot products with every document, once: its dot ranking, and scaled by the
  // norms its cosine ranking. Queries without relevant documents are not ranked.
  const std::int64_t nq = j.queries;
  std::vector<std::vector<std::int64_t>> cosine_ranked(nq), dot_ranked(nq);
  parallel_for(nq, 1, [&](std::int64_t begin, std::int64_t end) {
    std::vector<double> dots(j.corpus), cosines(j.corpus);
    for (std::int64_t q = begin; q < end; ++q) {
      if (j.relevant[q].empty()) continue;
      for (std::int64_t d = 0; d < j.corpus; ++d) {
        dots[d] = dot(q, nq + d);
        cosines[d] = dots[d] * inv_norm[q] * inv_norm[nq + d];
      }
      dot_ranked[q] = top_k(dots, kRetrievalDepth);
      cosine_ranked[q] = top_k(cosines, kRetrievalDepth);
    }
  });
  std::vector<std::pair<std::string, double>> out =
      ranking_metrics(cosine_ranked, j.relevant, "cosine_");
  for (auto& m : ranking_metrics(dot_ranked, j.relevant, "dot_")) out.push_back(std::move(m));
  return out;
}

}  // namespace bertfit
