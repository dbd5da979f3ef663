// The training loop: data order, micro-batches and accumulation, forward / loss / backward,
// clipping, the LR schedule, AdamW, evaluation, logging (progress + metrics.jsonl), resumable
// checkpoints and the final model in HF layout.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "train/options.h"

namespace bertfit {

struct TrainSummary {
  std::int64_t steps = 0;  // the run's optimizer steps in all, as metrics.jsonl's final record
  double seconds = 0;
  double samples_per_second = 0;
  double final_loss = 0;
  // The last evaluation's metrics, or the best's with --load-best-model-at-end (may be empty).
  std::vector<std::pair<std::string, double>> dev_metrics;
  std::optional<std::int64_t> best_step;  // the best evaluation's step (none: no evaluation)
  bool stopped_early = false;             // --early-stopping-patience ended the run
  int rank = 0;                   // of this process in a data-parallel run (only rank 0 reports)
  bool already_finished = false;  // resumed a run that had ended: nothing was done
};

// Runs `bertfit train` end to end. Throws Error for anything the user can get wrong, before
// writing any output where possible.
TrainSummary run_training(const TrainOptions& options);

}  // namespace bertfit
