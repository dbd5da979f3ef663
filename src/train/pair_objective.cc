// Sentence-embedding training's step objective (see pair_objective.h).
#include "train/pair_objective.h"

#include <cstring>

#include "base/check.h"

namespace bertfit {

PairObjective::PairObjective(PairLoss loss, double scale, int columns, int width,
                             Communicator* comm)
    : loss_(loss), scale_(scale), columns_(columns), width_(width), comm_(comm) {}

double PairObjective::loss(const Batch* batch, float share, Activations& acts) {
  const int D = width_, k = columns_;
  const int local = batch ? batch->B / k : 0;  // this rank's samples
  CHECK(!batch || batch->B == local * k, "a batch of ", batch->B, " texts for ", k, " columns");
  const bool scored = pair_loss_scored(loss_);
  const float* scores = batch && scored ? batch->labels.data() : nullptr;
  if (!collective()) {
    PairBatch p{acts.logits.data(), local, k, D, scores};
    return share * pair_loss(loss_, scale_, p, share, acts.dlogits.data());
  }
  // Every rank's sample count and share, then its embeddings (by column) and scores.
  const std::vector<float> heads = comm_->allgatherv({static_cast<float>(local), share});
  std::vector<float> mine(acts.logits.data(), acts.logits.data() + std::int64_t{local} * k * D);
  if (scores) mine.insert(mine.end(), scores, scores + local);  // none when local is 0
  const std::vector<float> all = comm_->allgatherv(mine);
  const int world = comm_->world();
  std::vector<int> counts(world), first(world);  // samples per rank, and the first's index
  int total = 0;
  float total_share = 0;
  for (int r = 0; r < world; ++r) {
    counts[r] = static_cast<int>(heads[2 * r]);
    first[r] = total;
    total += counts[r];
    total_share += heads[2 * r + 1];
  }
  std::vector<float> embeddings(std::int64_t{total} * k * D), all_scores(total);
  std::int64_t at = 0;
  for (int r = 0; r < world; ++r) {
    for (int c = 0; c < k; ++c) {
      const std::int64_t n = std::int64_t{counts[r]} * D;
      std::memcpy(embeddings.data() + (std::int64_t{c} * total + first[r]) * D, all.data() + at,
                  sizeof(float) * n);
      at += n;
    }
    if (scored) {
      std::memcpy(all_scores.data() + first[r], all.data() + at, sizeof(float) * counts[r]);
      at += counts[r];
    }
  }
  CHECK(at == static_cast<std::int64_t>(all.size()), "gathered ", all.size(), " values, read ", at);
  gradient_.resize(embeddings.size());
  PairBatch p{embeddings.data(), total, k, D, scored ? all_scores.data() : nullptr};
  const double value = pair_loss(loss_, scale_, p, total_share, gradient_.data());
  const int me = comm_->rank();
  for (int c = 0; c < k; ++c) {
    std::memcpy(acts.dlogits.data() + std::int64_t{c} * local * D,
                gradient_.data() + (std::int64_t{c} * total + first[me]) * D,
                sizeof(float) * local * D);
  }
  return share * value;
}

}  // namespace bertfit
