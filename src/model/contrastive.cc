// Sentence-embedding losses (see contrastive.h).
#include "model/contrastive.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "base/check.h"

namespace bertfit {
namespace {

constexpr double kNormEps = 1e-12;  // F.normalize's floor of the norm

// The rows of E normalized (double), and their norms.
struct Normalized {
  std::vector<double> u, norm;
  int D = 0;
  const double* row(std::int64_t r) const { return u.data() + r * D; }
};

Normalized normalize_rows(const float* e, std::int64_t rows, int D) {
  Normalized n{std::vector<double>(static_cast<std::size_t>(rows) * D),
               std::vector<double>(static_cast<std::size_t>(rows)), D};
  for (std::int64_t r = 0; r < rows; ++r) {
    double sq = 0;
    for (int k = 0; k < D; ++k) sq += double{e[r * D + k]} * e[r * D + k];
    n.norm[r] = std::max(std::sqrt(sq), kNormEps);
    for (int k = 0; k < D; ++k) n.u[r * D + k] = e[r * D + k] / n.norm[r];
  }
  return n;
}

double dot(const double* a, const double* b, int D) {
  double s = 0;
  for (int k = 0; k < D; ++k) s += a[k] * b[k];
  return s;
}

// d E from d u through u = E / max(‖E‖, eps): (du − u (u·du)) / n, or du / n at the floor.
void through_normalize(const Normalized& n, const std::vector<double>& du, float grad_scale,
                       float* d_embeddings) {
  const int D = n.D;
  const std::int64_t rows = static_cast<std::int64_t>(n.norm.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    const double* u = n.row(r);
    const double* g = du.data() + r * D;
    const double proj = n.norm[r] > kNormEps ? dot(u, g, D) : 0.0;
    for (int k = 0; k < D; ++k) {
      d_embeddings[r * D + k] = static_cast<float>(grad_scale * (g[k] - u[k] * proj) / n.norm[r]);
    }
  }
}

double mnrl(double scale, const PairBatch& p, const Normalized& n, std::vector<double>& du) {
  const int B = p.B, D = p.D;
  const std::int64_t M = std::int64_t{B} * (p.columns - 1);  // candidates
  double loss = 0;
  std::vector<double> s(static_cast<std::size_t>(M));
  for (int i = 0; i < B; ++i) {
    const double* a = n.row(i);
    double top = -INFINITY;
    for (std::int64_t j = 0; j < M; ++j) {
      s[j] = scale * dot(a, n.row(B + j), D);
      top = std::max(top, s[j]);
    }
    double z = 0;
    for (std::int64_t j = 0; j < M; ++j) z += std::exp(s[j] - top);
    loss += top + std::log(z) - s[i];
    // d loss_i / d S_ij = softmax_ij − [j = i], over the mean's B.
    double* da = du.data() + std::int64_t{i} * D;
    for (std::int64_t j = 0; j < M; ++j) {
      const double g = scale * ((std::exp(s[j] - top) / z) - (j == i ? 1.0 : 0.0)) / B;
      const double* c = n.row(B + j);
      double* dc = du.data() + (B + j) * D;
      for (int k = 0; k < D; ++k) {
        da[k] += g * c[k];
        dc[k] += g * a[k];
      }
    }
  }
  return loss / B;
}

double cosent(double scale, const PairBatch& p, const Normalized& n, std::vector<double>& du) {
  const int B = p.B, D = p.D;
  std::vector<double> s(B), ds(B, 0.0);
  for (int i = 0; i < B; ++i) s[i] = scale * dot(n.row(i), n.row(B + i), D);
  // logsumexp over {0} ∪ {s_i − s_j : y_i < y_j}.
  double top = 0;
  for (int i = 0; i < B; ++i)
    for (int j = 0; j < B; ++j)
      if (p.scores[i] < p.scores[j]) top = std::max(top, s[i] - s[j]);
  double z = std::exp(-top);
  for (int i = 0; i < B; ++i)
    for (int j = 0; j < B; ++j)
      if (p.scores[i] < p.scores[j]) z += std::exp(s[i] - s[j] - top);
  for (int i = 0; i < B; ++i) {
    for (int j = 0; j < B; ++j) {
      if (!(p.scores[i] < p.scores[j])) continue;
      const double w = std::exp(s[i] - s[j] - top) / z;
      ds[i] += w;
      ds[j] -= w;
    }
  }
  for (int i = 0; i < B; ++i) {
    const double g = scale * ds[i];
    const double *u = n.row(i), *v = n.row(B + i);
    for (int k = 0; k < D; ++k) {
      du[std::int64_t{i} * D + k] += g * v[k];
      du[std::int64_t{B + i} * D + k] += g * u[k];
    }
  }
  return top + std::log(z);
}

double cosine_mse(const PairBatch& p, const Normalized& n, std::vector<double>& du) {
  const int B = p.B, D = p.D;
  double loss = 0;
  for (int i = 0; i < B; ++i) {
    const double *u = n.row(i), *v = n.row(B + i);
    const double diff = dot(u, v, D) - p.scores[i];
    loss += diff * diff;
    const double g = 2 * diff / B;
    for (int k = 0; k < D; ++k) {
      du[std::int64_t{i} * D + k] += g * v[k];
      du[std::int64_t{B + i} * D + k] += g * u[k];
    }
  }
  return loss / B;
}

}  // namespace

std::optional<PairLoss> parse_pair_loss(std::string_view name) {
  if (name == "mnrl") return PairLoss::kMultipleNegativesRanking;
  if (name == "cosent") return PairLoss::kCoSENT;
  if (name == "cosine") return PairLoss::kCosineSimilarity;
  return std::nullopt;
}

const char* pair_loss_name(PairLoss loss) {
  switch (loss) {
    case PairLoss::kMultipleNegativesRanking:
      return "mnrl";
    case PairLoss::kCoSENT:
      return "cosent";
    case PairLoss::kCosineSimilarity:
      return "cosine";
  }
  return "?";
}

bool pair_loss_scored(PairLoss loss) { return loss != PairLoss::kMultipleNegativesRanking; }

double pair_loss(PairLoss loss, double scale, const PairBatch& batch, float grad_scale,
                 float* d_embeddings) {
  CHECK(batch.B > 0 && batch.D > 0, "an empty pair batch");
  if (pair_loss_scored(loss)) {
    CHECK(batch.columns == 2 && batch.scores != nullptr, "a scored pair loss needs two columns");
  } else {
    CHECK(batch.columns >= 2, "MultipleNegativesRankingLoss needs candidates");
  }
  const std::int64_t rows = std::int64_t{batch.B} * batch.columns;
  const Normalized n = normalize_rows(batch.embeddings, rows, batch.D);
  std::vector<double> du(static_cast<std::size_t>(rows) * batch.D, 0.0);
  double value = 0;
  switch (loss) {
    case PairLoss::kMultipleNegativesRanking:
      value = mnrl(scale, batch, n, du);
      break;
    case PairLoss::kCoSENT:
      value = cosent(scale, batch, n, du);
      break;
    case PairLoss::kCosineSimilarity:
      value = cosine_mse(batch, n, du);
      break;
  }
  through_normalize(n, du, grad_scale, d_embeddings);
  return value;
}

double cosine_similarity(const float* a, const float* b, int D) {
  double ab = 0, aa = 0, bb = 0;
  for (int k = 0; k < D; ++k) {
    ab += double{a[k]} * b[k];
    aa += double{a[k]} * a[k];
    bb += double{b[k]} * b[k];
  }
  return ab / (std::max(std::sqrt(aa), kNormEps) * std::max(std::sqrt(bb), kNormEps));
}

}  // namespace bertfit
