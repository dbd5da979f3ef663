// The set-up of a training run, everything before its first step: the threads of this rank,
// the model and its tokenizer, the task and its examples (encoded), the output folder, resuming
// from a checkpoint, the run's sizes and LR schedule, every rank starting from rank 0's
// parameters, the optimizer step with its gradient reducer, and which rows of each step this
// rank takes (sharding). Anything a user can get wrong fails in TrainRun's constructor, which
// does no collective and touches no folder, so that the ranks can agree on a failure before
// start() (trainer.cc). The loop that runs the steps is trainer.cc's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "data/batch.h"
#include "model/bert.h"
#include "model/contrastive.h"
#include "model/model_io.h"
#include "task/dataset.h"
#include "train/best_model.h"
#include "train/optimizer.h"
#include "train/options.h"
#include "train/output_dir.h"
#include "train/sample_stream.h"
#include "train/step.h"

namespace bertfit {

// Log identity and threads of this process: ranks on one host split its cores (and any CPU
// quota) evenly unless --no-pin. Returns the line that says so (empty: nothing to say), logged
// once the set-up has succeeded on every rank.
std::string set_up_process(const TrainOptions& options, const Communicator& comm);

// The examples of a run, encoded, the task they belong to and the model's config for it.
struct RunData {
  TaskInfo task;
  ModelConfig config;     // the model's config.json with the task's labels and problem type
  bool new_head = false;  // the checkpoint's classifier is replaced (--ignore-mismatched-sizes)
  std::vector<EncodedExample> train;
  std::vector<std::pair<std::string, std::vector<EncodedExample>>> dev;  // (split, examples)
  // Sentence-embedding training (train/embedding_data.h): a sample is texts_per_sample
  // consecutive entries of `train` (anchor, positive, negatives...; the first holds a scored
  // pair's score), and a dev split the scored pairs by column (every first text, then every
  // second), as task/similarity.h takes them.
  int texts_per_sample = 1;
  std::optional<PairLoss> pair_loss;  // set: the run trains sentence embeddings with this loss
  double loss_scale = 20;

  std::int64_t samples() const {
    return static_cast<std::int64_t>(train.size()) / texts_per_sample;
  }
};

// The run's sizes and schedule. The global batch (samples per optimizer step) is fixed when a
// run starts and kept by its checkpoints: a run resumed on another number of ranks adapts the
// per-rank batch or accumulation (checkpoint.h: resume_step_shape) and continues the same
// sample stream. Its length (total_samples) may be extended on resume (--max-steps, --epochs),
// and the LR schedule then follows the new length, as Trainer's does (docs/DESIGN.md).
struct RunPlan {
  std::int64_t n = 0;             // training examples
  int batch = 0, accum = 0;       // per rank: rows of a micro-batch, micro-batches of a step
  std::int64_t micro_global = 0;  // samples of one micro-batch, all ranks (batch × N)
  std::int64_t per_step = 0;      // samples of one optimizer step (micro_global × accumulation)
  std::int64_t total_samples = 0;
  std::int64_t start_step = 0, start_sample = 0;  // where this run starts (0, or the checkpoint)
  std::int64_t total_steps = 0;                   // the run's steps in all, resumed ones included
  std::int64_t sched_per_step = 0, sched_total = 0, warmup = 0;  // the LR schedule's steps
  // The schedule the checkpoint was written under (a fresh run: the one above). Its LR at the
  // checkpoint's step is the first resumed step's: Trainer restores the LR the optimizer held.
  std::int64_t restored_sched_total = 0, restored_warmup = 0;
};

// A run ready for its first step. Members are built in order; the constructor throws Error
// for anything the user can get wrong, without a collective, so every rank reaches the set-up
// vote (trainer.cc) whatever happened; start() then does the collective part.
struct TrainRun {
  TrainRun(const TrainOptions& train_options, Communicator& communicator);
  TrainRun(const TrainRun&) = delete;
  TrainRun& operator=(const TrainRun&) = delete;

  // Creates the output folder (rank 0), gives every rank rank 0's parameters (and Adam state
  // when resuming), and decides already_finished. All ranks call it, after the vote.
  void start();

  // This rank's part of each micro-batch of the step that covers samples [first, last) of the
  // run: each micro-batch of micro_global samples is split across ranks by token counts.
  std::vector<MicroBatch> step_batches(std::int64_t first, std::int64_t last);
  // The learning rate of the step that starts at sample `first`.
  double lr_at(std::int64_t first) const;

  const TrainOptions& options;
  Communicator& comm;
  const int rank, world;
  const std::string checkpoint_dir;  // resumed from (empty: a fresh run)
  OutputDir out;
  RunData data;      // decided before the weights load: the head's size comes from the data
  BestTracker best;  // of the first dev split's evaluations; resumed from the checkpoint
  ModelState state;
  BertModel model;
  AdamW optimizer;
  RunPlan plan;  // resuming loads the optimizer's moments
  SampleStream stream;
  BatchOptions batch_options;
  TrainStep step;
  // Resumed a run whose model and final metrics record are written: there is nothing to do.
  bool already_finished = false;
  bool stopped_early = false;  // the checkpoint is where early stopping ended the run
};

}  // namespace bertfit
