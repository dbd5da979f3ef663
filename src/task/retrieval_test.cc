// The retrieval metrics on rankings worked out by hand from InformationRetrievalEvaluator's
// definitions (sentence-transformers 2.2.2, compute_metrics): ties in score, queries without a
// relevant document, a k beyond the corpus, cosine against dot product. The end-to-end check
// against the evaluator's own numbers is tests/cli/retrieval_cli_test.cc.
#include "task/retrieval.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace bertfit {
namespace {

using Metrics = std::map<std::string, double>;

Metrics as_map(const std::vector<std::pair<std::string, double>>& metrics) {
  Metrics m;
  for (const auto& [name, value] : metrics) EXPECT_TRUE(m.emplace(name, value).second) << name;
  return m;
}

// Exact up to the few roundings of a mean of a handful of terms.
constexpr double kTol = 1e-12;

TEST(TopK, OrdersByScoreThenIndexAndStopsAtTheCorpus) {
  const std::vector<double> scores = {0.5, 0.9, 0.5, 0.9, -1.0};
  EXPECT_EQ(top_k(scores, 3), (std::vector<std::int64_t>{1, 3, 0}));
  EXPECT_EQ(top_k(scores, 100), (std::vector<std::int64_t>{1, 3, 0, 2, 4}));
  EXPECT_TRUE(top_k(scores, 0).empty());
  EXPECT_TRUE(top_k({}, 10).empty());
}

TEST(RankingMetrics, OneQueryWorkedByHand) {
  // Four documents ranked 2, 0, 1, 3; relevant: 0 and 3 (places 2 and 4). Every k ≥ 5 is beyond
  // the corpus: precision@10 still divides by 10, as the evaluator does.
  const Metrics m = as_map(ranking_metrics({{2, 0, 1, 3}}, {{0, 3}}, "cosine_"));
  const double idcg = 1 + 1 / std::log2(3.0);
  EXPECT_NEAR(m.at("cosine_ndcg@10"), (1 / std::log2(3.0) + 1 / std::log2(5.0)) / idcg, kTol);
  EXPECT_NEAR(m.at("cosine_mrr@10"), 0.5, kTol);
  EXPECT_NEAR(m.at("cosine_map@100"), (1.0 / 2 + 2.0 / 4) / 2, kTol);
  const std::map<int, double> accuracy = {{1, 0}, {3, 1}, {5, 1}, {10, 1}},
                              precision = {{1, 0}, {3, 1.0 / 3}, {5, 2.0 / 5}, {10, 2.0 / 10}},
                              recall = {{1, 0}, {3, 0.5}, {5, 1}, {10, 1}};
  for (int k : {1, 3, 5, 10}) {
    const std::string at = std::string("@").append(std::to_string(k));
    EXPECT_NEAR(m.at("cosine_accuracy" + at), accuracy.at(k), kTol) << k;
    EXPECT_NEAR(m.at("cosine_precision" + at), precision.at(k), kTol) << k;
    EXPECT_NEAR(m.at("cosine_recall" + at), recall.at(k), kTol) << k;
  }
  EXPECT_EQ(m.size(), 15u);
}

TEST(RankingMetrics, QueriesWithoutRelevantDocumentsAreLeftOut) {
  // Query 0: the relevant document first. Query 1: none relevant (dropped: it would otherwise
  // halve every mean). Query 2: its one relevant document at place 12 of 12: outside every
  // cut-off but map@100's (1/12).
  std::vector<std::int64_t> twelve;
  for (std::int64_t d = 0; d < 12; ++d) twelve.push_back(d);
  const Metrics m = as_map(ranking_metrics({twelve, twelve, twelve}, {{0}, {}, {11}}, "dot_"));
  EXPECT_NEAR(m.at("dot_ndcg@10"), 0.5, kTol);
  EXPECT_NEAR(m.at("dot_mrr@10"), 0.5, kTol);
  EXPECT_NEAR(m.at("dot_map@100"), (1 + 1.0 / 12) / 2, kTol);
  EXPECT_NEAR(m.at("dot_accuracy@1"), 0.5, kTol);
  EXPECT_NEAR(m.at("dot_precision@3"), (1.0 / 3) / 2, kTol);
  EXPECT_NEAR(m.at("dot_recall@10"), 0.5, kTol);
  // With only the query that has one, the same as that query alone.
  EXPECT_EQ(as_map(ranking_metrics({twelve, twelve}, {{}, {0}}, "dot_")),
            as_map(ranking_metrics({twelve}, {{0}}, "dot_")));
}

TEST(RankingMetrics, MoreRelevantDocumentsThanPlaces) {
  // 12 relevant documents, all ranked first: ndcg@10's ideal has 10 of them, map@100 divides by
  // min(100, 12) = 12, recall@10 = 10/12.
  std::vector<std::int64_t> all;
  for (std::int64_t d = 0; d < 12; ++d) all.push_back(d);
  const Metrics m = as_map(ranking_metrics({all}, {all}, "cosine_"));
  EXPECT_NEAR(m.at("cosine_ndcg@10"), 1.0, kTol);
  EXPECT_NEAR(m.at("cosine_map@100"), 1.0, kTol);
  EXPECT_NEAR(m.at("cosine_precision@10"), 1.0, kTol);
  EXPECT_NEAR(m.at("cosine_recall@10"), 10.0 / 12, kTol);
}

TEST(RetrievalMetrics, CosineAndDotRankApartAndTiesGoByCorpusOrder) {
  // D = 2. Query (1, 0). Documents: d0 (0, 1): cos 0, dot 0; d1 (1, 1): cos 0.707, dot 1;
  // d2 (0.5, 0.1): cos 0.981, dot 0.5; d3 (1, 1) = d1: an exact tie with d1; d4 (0, 0): the
  // zero vector, cos 0 (norm clamped at 1e-12), not NaN. Relevant: d3.
  // Cosine order: d2, d1, d3 (the tie: corpus order), d0, d4 -> d3 at place 3.
  // Dot order: d1, d3, d2, d0, d4 -> d3 at place 2.
  // A second query (0, 1) has no relevant document: left out.
  const std::vector<float> embeddings = {1, 0, 0, 1,  // the queries
                                         0, 1, 1, 1, 0.5f, 0.1f, 1, 1, 0, 0};
  RetrievalJudgements j;
  j.queries = 2;
  j.corpus = 5;
  j.relevant = {{3}, {}};
  const Metrics m = as_map(retrieval_metrics(embeddings, 2, j));
  EXPECT_NEAR(m.at("cosine_mrr@10"), 1.0 / 3, kTol);
  EXPECT_NEAR(m.at("dot_mrr@10"), 1.0 / 2, kTol);
  EXPECT_NEAR(m.at("cosine_ndcg@10"), 1 / std::log2(4.0), kTol);
  EXPECT_NEAR(m.at("dot_ndcg@10"), 1 / std::log2(3.0), kTol);
  EXPECT_NEAR(m.at("cosine_accuracy@1"), 0.0, kTol);
  EXPECT_NEAR(m.at("dot_accuracy@3"), 1.0, kTol);
  EXPECT_NEAR(m.at("cosine_precision@5"), 1.0 / 5, kTol);
  EXPECT_NEAR(m.at("cosine_map@100"), 1.0 / 3, kTol);
  for (const auto& [name, value] : m) EXPECT_TRUE(std::isfinite(value)) << name;
}

TEST(RetrievalMetrics, NamesAreReportedInOrderMainFirst) {
  const std::vector<std::string> names = retrieval_metric_names();
  ASSERT_EQ(names.size(), 30u);
  EXPECT_EQ(names.front(), "cosine_ndcg@10");
  RetrievalJudgements j;
  j.queries = 1;
  j.corpus = 2;
  j.relevant = {{1}};
  const auto metrics = retrieval_metrics({1, 0, 1, 0, 0, 1}, 2, j);
  ASSERT_EQ(metrics.size(), names.size());
  for (std::size_t i = 0; i < names.size(); ++i) EXPECT_EQ(metrics[i].first, names[i]);
}

}  // namespace
}  // namespace bertfit
