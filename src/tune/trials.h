// The measurements of `bertfit tune`'s trials: each a fresh run of this very binary (read from
// /proc/self/exe, so the build that tunes is the build that is measured), warmed up, then
// measured. infer: `bench infer` in each instance of the layout, pinned to its share of the
// cores, their timed windows started together; serve: `serve --port 0` under a closed-loop HTTP
// load from this process; train: `train --max-steps` (under mpirun for several ranks), the
// step times read back from metrics.jsonl. A run that fails, or outlives its time, is a result
// saying so; tune goes on.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tune/space.h"
#include "tune/tuner.h"

namespace bertfit::tune {

struct TrialConfig {
  std::string binary;              // this binary (/proc/self/exe)
  std::string model;               // a model folder (a Hub name resolved already)
  std::vector<std::string> extra;  // more flags of the command run (train's data and head)
  std::string work_dir;            // the trials' files (outputs, logs)
  Objective objective;
  SpaceContext context;
  double warmup_s = 1, measure_s = 3;     // serve: load; infer: the timed window
  double timeout_s = 120;                 // a trial's whole wall-clock limit
  int seq_len = 128;                      // infer: tokens per sequence; serve: the text's words
  int concurrency = 1;                    // serve: connections of the closed loop
  std::vector<std::string> texts;         // serve: one request's text each (in turn)
  std::string target = "/predict";        // serve: the route (/embed for a sentence embedder)
  int warmup_steps = 2, timed_steps = 5;  // train
};

std::unique_ptr<TrialRunner> make_infer_runner(const TrialConfig& config);
std::unique_ptr<TrialRunner> make_train_runner(const TrialConfig& config);
std::unique_ptr<TrialRunner> make_serve_runner(const TrialConfig& config);

// The path of the running binary.
std::string self_binary();

}  // namespace bertfit::tune
