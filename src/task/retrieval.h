// How well embeddings retrieve, as sentence-transformers 2.2.2's InformationRetrievalEvaluator
// computes it with its default settings: every query's documents ranked by the cosine
// similarity (and by the dot product: 2.2.2 computes both) of their embeddings, then, over the
// queries that have a relevant document (the others are dropped, as the evaluator drops them):
//   accuracy@k   share of queries with a relevant document in the top k       (k = 1, 3, 5, 10)
//   precision@k  mean of (relevant documents in the top k) / k                (k = 1, 3, 5, 10)
//   recall@k     mean of (relevant documents in the top k) / |relevant|       (k = 1, 3, 5, 10)
//   mrr@10       mean of 1 / rank of the first relevant document in the top 10 (0 if none)
//   ndcg@10      binary gains, discount log2(rank + 1), ideal: every relevant document first
//   map@100      mean of Σ_{relevant hits in the top 100} (hits so far / rank) / min(100,
//   |relevant|)
// k counts places even where the corpus is shorter (precision@10 of a 3-document corpus divides
// by 10, as the evaluator does). Equal scores rank by corpus order (the earlier document
// first; the evaluator's torch.topk leaves that order unspecified).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace bertfit {

// The relevance judgements of a retrieval evaluation, by position: the embeddings it scores are
// (queries + corpus, D), the queries' rows first.
struct RetrievalJudgements {
  std::int64_t queries = 0;
  std::int64_t corpus = 0;
  // Per query: the corpus indices of its relevant documents, sorted and distinct. A query with
  // none takes no part in any metric.
  std::vector<std::vector<std::int64_t>> relevant;
};

// The metric names retrieval_metrics reports, in its order: cosine_ndcg@10 first (the main
// one), then cosine_mrr@10, cosine_map@100, cosine_accuracy@k, cosine_precision@k,
// cosine_recall@k; the same with the prefix dot_ (sentence-transformers v3 names them so).
std::vector<std::string> retrieval_metric_names();

// The largest k any metric looks at (map@100): how many documents are ranked per query.
inline constexpr int kRetrievalDepth = 100;

// The metrics of ranked lists (one per query: corpus indices, best first, at least
// min(kRetrievalDepth, corpus) of them) against the relevant documents, each name prefixed by
// `prefix` ("cosine_"). Queries without relevant documents are left out; CHECK: some query has one.
std::vector<std::pair<std::string, double>> ranking_metrics(
    const std::vector<std::vector<std::int64_t>>& ranked,
    const std::vector<std::vector<std::int64_t>>& relevant, const std::string& prefix);

// The top min(k, n) of scores[0, n): indices by descending score, equal scores by index.
std::vector<std::int64_t> top_k(const std::vector<double>& scores, int k);

// embeddings: (queries + corpus, D), row-major, as RetrievalJudgements says. Cosine similarity
// as sentence-transformers' cos_sim (each vector divided by max(‖v‖, 1e-12)), computed in double.
std::vector<std::pair<std::string, double>> retrieval_metrics(
    const std::vector<float>& embeddings, int D, const RetrievalJudgements& judgements);

}  // namespace bertfit
