// Sentence-embedding training's step objective: the batch's texts are embedded together (the
// micro-batch holds every text of its samples, column by column: all anchors, then all
// positives, then each hard-negative column) and the loss is taken over them (model/contrastive.h).
// With several ranks it is the loss of the global micro-batch, as sentence-transformers' gathered
// losses take it: every rank gathers every rank's embeddings (one all-gather per micro-batch),
// computes the whole loss and its gradient, and back-propagates the rows of its own texts, so
// every anchor meets every rank's candidates and N ranks × b samples equal 1 rank × N·b.
#pragma once

#include <vector>

#include "comm/communicator.h"
#include "model/contrastive.h"
#include "train/step.h"

namespace bertfit {

class PairObjective final : public StepObjective {
 public:
  // `columns` texts per sample, embeddings of `width` values; `comm` may be null (one process).
  PairObjective(PairLoss loss, double scale, int columns, int width, Communicator* comm);

  double loss(const Batch* batch, float share, Activations& acts) override;
  bool collective() const override { return comm_ != nullptr && comm_->world() > 1; }

 private:
  PairLoss loss_;
  double scale_;
  int columns_, width_;
  Communicator* comm_;
  std::vector<float> gradient_;  // of the global batch's embeddings
};

}  // namespace bertfit
