// The losses of sentence-embedding training, over a batch of embeddings, with their gradient, as
// sentence-transformers takes them (its losses module; the formulas below):
//
// A batch holds B samples of `columns` texts each; its embeddings are laid out by column: rows
// [c·B, (c+1)·B) of E (columns·B, D) are text c of every sample. u_r = E_r / max(‖E_r‖₂, 1e-12)
// (util.cos_sim's F.normalize).
//   MultipleNegativesRankingLoss: column 0 the anchors, every later column candidates (the
//     positives, then any hard negatives); S_ij = scale · u_i · u_{B+j}, and the mean over i of
//     the cross-entropy of row S_i against its own positive j = i.
//   CoSENTLoss (sentence-transformers 2.3+): two columns and a score per sample;
//     s_i = scale · u_i · u_{B+i}, loss = log(1 + Σ_{i,j: y_i < y_j} exp(s_i − s_j)).
//   CosineSimilarityLoss: two columns and a score; the mean of (u_i · u_{B+i} − y_i)².
// Computed in double; the embeddings' gradient is exact (the finite-difference test checks it).
#pragma once

#include <optional>
#include <string_view>

namespace bertfit {

enum class PairLoss { kMultipleNegativesRanking, kCoSENT, kCosineSimilarity };

// mnrl, cosent, cosine (what --loss reads) -> the loss; nullopt otherwise.
std::optional<PairLoss> parse_pair_loss(std::string_view name);
const char* pair_loss_name(PairLoss loss);
// Whether the loss reads a score per sample (CoSENT, cosine).
bool pair_loss_scored(PairLoss loss);

struct PairBatch {
  const float* embeddings = nullptr;  // (columns·B, D), by column
  int B = 0, columns = 0, D = 0;
  const float* scores = nullptr;  // (B): the scored losses' labels
};

// The loss of the batch (B > 0; MNRL needs at least two columns, the scored ones exactly two),
// and d_embeddings (columns·B, D) = grad_scale · d loss / d E.
double pair_loss(PairLoss loss, double scale, const PairBatch& batch, float grad_scale,
                 float* d_embeddings);

// The cosine similarity of rows a and b of length D (the normalized rows' dot product).
double cosine_similarity(const float* a, const float* b, int D);

}  // namespace bertfit
