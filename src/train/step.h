// One optimizer step, the unit `train` repeats and `bench train` times: forward, loss and
// backward of each micro-batch, the sum of the gradients across ranks (buckets sent while
// backward still runs, when there are several ranks), the global norm, clipping and AdamW.
// The caller chooses the data (which rows, how they are split across ranks) and the schedule
// (the learning rate); the step owns the gradient buffer, the activations and the reducer.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "base/aligned.h"
#include "comm/communicator.h"
#include "data/batch.h"
#include "model/bert.h"
#include "train/optimizer.h"

namespace bertfit {

class GradReducer;

// How gradients travel between ranks (used only when the communicator has several).
struct GradSync {
  std::int64_t bucket_bytes = 8 << 20;
  WireDType wire = WireDType::kF32;  // precision of the summed gradients on the wire
};

// This rank's part of one micro-batch: its rows (none when a short last micro-batch leaves this
// rank without any) and their share of the step's samples, which weights the micro-batch's
// mean loss so that the step's gradient is the mean over all its samples on any number of ranks.
// With class weights the micro-batch's loss is a weighted mean and the share is its rows' part
// of the step's total weight: the step's loss is then the weighted mean over the whole step.
struct MicroBatch {
  std::optional<Batch> batch;
  float share = 0;
};

// What a micro-batch costs after its forward: this rank's part of the step's loss (the
// micro-batch's loss times its share), with acts.dlogits set for backward. The classifiers' is
// the head's loss (BertModel::loss); sentence-embedding training's is over the batch's texts
// together (train/pair_objective.h).
class StepObjective {
 public:
  virtual ~StepObjective() = default;
  // `batch` null: this rank has no rows in the micro-batch (called only when collective()).
  virtual double loss(const Batch* batch, float share, Activations& acts) = 0;
  // Whether every rank must call loss() for every micro-batch, rows or not (it communicates).
  virtual bool collective() const { return false; }
};

struct StepReport {
  double loss = 0;       // the step's mean loss over every rank's samples
  double grad_norm = 0;  // global L2 norm before clipping
  bool applied = false;  // false: the loss or the norm was not finite; parameters untouched
  bool stop = false;     // some rank asked to stop after this step (run's stop_requested)
  double forward_s = 0, backward_s = 0, update_s = 0;  // this rank's time in each phase
  double exposed_comm_s = 0;  // time spent waiting for gradients from other ranks
};

class TrainStep {
 public:
  // `comm` may be null (one process). `seed` keys the dropout masks with the step and micro-batch.
  TrainStep(const BertModel& model, AdamW& optimizer, Communicator* comm, std::uint64_t seed,
            const GradSync& sync = {});
  ~TrainStep();
  TrainStep(const TrainStep&) = delete;
  TrainStep& operator=(const TrainStep&) = delete;

  // Runs step `step` (its index keys dropout) over `micro` at learning rate `lr`, clipping the
  // global norm to `max_grad_norm` (0: no clipping). Every rank must call it with the same
  // number of micro-batches. `stop_requested` is this rank's vote to stop after the step; the
  // report's `stop` is true when any rank voted.
  StepReport run(float* params, const std::vector<MicroBatch>& micro, std::int64_t step, double lr,
                 double max_grad_norm, bool stop_requested = false);

  // Replaces the classifier's loss (the default) for the steps to come.
  void use_objective(std::unique_ptr<StepObjective> objective);

  // Activations to reuse for evaluation between steps (no memory of its own needed).
  Activations& activations() { return acts_; }

 private:
  const BertModel& model_;
  AdamW& optimizer_;
  Communicator* comm_;
  std::uint64_t seed_;
  int rank_ = 0, world_ = 1;
  ModelWeights weights_;  // prepared from the parameters once per step
  AlignedBuffer<float> grads_;
  Activations acts_;
  std::unique_ptr<GradReducer> reducer_;
  std::unique_ptr<StepObjective> objective_;
};

}  // namespace bertfit
