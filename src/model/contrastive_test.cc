// The sentence-embedding losses: values of hand-made batches, and the gradient against central
// differences (the golden values of sentence-transformers are checked through `train`,
// tests/cli/train_embedding_cli_test.cc).
#include "model/contrastive.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace bertfit {
namespace {

std::vector<float> random_rows(int rows, int D, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> e(static_cast<std::size_t>(rows) * D);
  for (float& x : e) x = dist(gen);
  return e;
}

// Every entry of the gradient against central differences of the loss (step 1e-3 on inputs of
// order 1: truncation ~1e-7 of the loss's scale; the loss is computed in double).
void expect_gradient(PairLoss kind, double scale, int B, int columns, int D,
                     const std::vector<float>& scores, float grad_scale) {
  std::vector<float> e = random_rows(B * columns, D, 7 + B + columns);
  PairBatch p{e.data(), B, columns, D, scores.empty() ? nullptr : scores.data()};
  std::vector<float> grad(e.size()), scratch(e.size());
  pair_loss(kind, scale, p, grad_scale, grad.data());
  const float h = 1e-3f;
  for (std::size_t i = 0; i < e.size(); ++i) {
    const float saved = e[i];
    e[i] = saved + h;
    const double up = pair_loss(kind, scale, p, 1.0f, scratch.data());
    e[i] = saved - h;
    const double down = pair_loss(kind, scale, p, 1.0f, scratch.data());
    e[i] = saved;
    const double numeric = grad_scale * (up - down) / (double{e[i] + h} - (e[i] - h));
    EXPECT_NEAR(grad[i], numeric, 2e-4 * (1 + std::abs(numeric)))
        << pair_loss_name(kind) << " " << i;
  }
}

TEST(PairLoss, NamesRoundTrip) {
  for (PairLoss l :
       {PairLoss::kMultipleNegativesRanking, PairLoss::kCoSENT, PairLoss::kCosineSimilarity}) {
    EXPECT_EQ(parse_pair_loss(pair_loss_name(l)), l);
  }
  EXPECT_FALSE(parse_pair_loss("triplet"));
  EXPECT_FALSE(pair_loss_scored(PairLoss::kMultipleNegativesRanking));
  EXPECT_TRUE(pair_loss_scored(PairLoss::kCoSENT));
}

// Orthogonal anchors equal to their positives (of another length): S_ii = scale, S_ij = 0.
TEST(PairLoss, MultipleNegativesRankingOfOrthogonalPairs) {
  const int B = 3, D = 4;
  std::vector<float> e(2 * B * D, 0.0f);
  for (int i = 0; i < B; ++i) {
    e[i * D + i] = 1.0f;
    e[(B + i) * D + i] = 2.5f;
  }
  std::vector<float> g(e.size());
  const double loss =
      pair_loss(PairLoss::kMultipleNegativesRanking, 20, {e.data(), B, 2, D, nullptr}, 1, g.data());
  EXPECT_NEAR(loss, std::log(std::exp(20.0) + 2) - 20, 1e-12);
}

// Hard negatives are more candidates: an anchor whose negative equals its positive loses log 2.
TEST(PairLoss, HardNegativeEqualToThePositiveCostsLogTwo) {
  const int B = 1, D = 3;
  std::vector<float> e = {1, 0, 0, 2, 0, 0, 3, 0, 0};
  std::vector<float> g(e.size());
  const double loss =
      pair_loss(PairLoss::kMultipleNegativesRanking, 20, {e.data(), B, 3, D, nullptr}, 1, g.data());
  EXPECT_NEAR(loss, std::log(2.0), 1e-12);
}

TEST(PairLoss, CoSENTAndCosineOfKnownSimilarities) {
  // Pair 0 at cos 1, pair 1 at cos 0 (orthogonal).
  const int B = 2, D = 2;
  std::vector<float> e = {1, 0, 1, 0, /*second texts*/ 1, 0, 0, 1};
  std::vector<float> g(e.size());
  std::vector<float> right = {1.0f, 0.0f}, wrong = {0.0f, 1.0f};
  // Ordered as the scores say: only the pair (1, 0) counts, exp(s_1 − s_0) = exp(−20).
  EXPECT_NEAR(pair_loss(PairLoss::kCoSENT, 20, {e.data(), B, 2, D, right.data()}, 1, g.data()),
              std::log1p(std::exp(-20.0)), 1e-12);
  EXPECT_NEAR(pair_loss(PairLoss::kCoSENT, 20, {e.data(), B, 2, D, wrong.data()}, 1, g.data()),
              std::log1p(std::exp(20.0)), 1e-9);
  std::vector<float> scores = {0.5f, 0.25f};
  EXPECT_NEAR(
      pair_loss(PairLoss::kCosineSimilarity, 20, {e.data(), B, 2, D, scores.data()}, 1, g.data()),
      (0.25 + 0.0625) / 2, 1e-7);
}

TEST(PairLoss, GradientsMatchCentralDifferences) {
  expect_gradient(PairLoss::kMultipleNegativesRanking, 20, 4, 2, 5, {}, 1.0f);
  expect_gradient(PairLoss::kMultipleNegativesRanking, 20, 3, 3, 4, {}, 0.5f);  // hard negatives
  std::vector<float> scores = {0.1f, 0.9f, 0.4f, 0.4f};
  expect_gradient(PairLoss::kCoSENT, 20, 4, 2, 5, scores, 1.0f);
  expect_gradient(PairLoss::kCosineSimilarity, 20, 4, 2, 5, scores, 0.25f);
}

TEST(PairLoss, CosineSimilarityOfRows) {
  const float a[] = {1, 2, 2}, b[] = {2, 4, 4}, c[] = {-2, 1, 0};
  EXPECT_NEAR(cosine_similarity(a, b, 3), 1.0, 1e-12);
  EXPECT_NEAR(cosine_similarity(a, c, 3), 0.0, 1e-12);
}

}  // namespace
}  // namespace bertfit
