// How well embeddings rank scored pairs, as sentence-transformers' EmbeddingSimilarityEvaluator
// computes it: per pair the cosine similarity, the negated Manhattan and Euclidean distances and
// the dot product of the two texts' embeddings; per measure Pearson's and Spearman's correlation
// with the gold scores (Spearman: Pearson's of the ranks, ties at their mean rank, as scipy).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace bertfit {

// The metric names similarity_metrics reports, in its order: spearman_cosine first (the main
// one), then pearson_cosine, and both for manhattan, euclidean and dot.
std::vector<std::string> similarity_metric_names();

// embeddings: (2·n, D) by column (rows [0, n) the first texts, [n, 2n) the second); scores (n).
// Errors (Error): fewer than two pairs, or scores that are all equal (no correlation exists).
std::vector<std::pair<std::string, double>> similarity_metrics(const std::vector<float>& embeddings,
                                                               int D,
                                                               const std::vector<double>& scores);

// Pearson's correlation of x and y (n ≥ 2; NaN when either is constant), and Spearman's.
double pearson(const std::vector<double>& x, const std::vector<double>& y);
double spearman(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace bertfit
