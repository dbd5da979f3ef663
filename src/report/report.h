// `bertfit report`: a training run's curves as one self-contained HTML page (inline SVG and CSS,
// no script, no network: a browser opens it offline), and the same records as TensorBoard
// scalars under Trainer's TensorBoard callback's names.
//
// A run folder holds metrics.jsonl (train/run_log.h): step records (step, epoch, loss, lr,
// grad_norm, samples_per_s, ...), evaluation records (split, eval_loss, eval_<metric>, ...) and
// a final record ("final": true); its checkpoint/trainer_state.json has the run's options.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "report/tensorboard.h"

namespace bertfit::report {

struct RunRecords {
  std::vector<nlohmann::json> steps, evals;
  nlohmann::json final = nullptr;     // the last record if it is a final one (the run ended)
  nlohmann::json settings = nullptr;  // the options, if a trainer_state.json was found
};

// Reads RUN_DIR/metrics.jsonl (and checkpoint/trainer_state.json when present). Throws Error
// naming the file (and line) when metrics.jsonl is missing, malformed or holds no record.
RunRecords read_run(const std::string& run_dir);

// The step marked best: the final record's "best_step" when the run chose one, else the
// evaluation with the lowest eval_loss (Trainer's default metric_for_best_model); none without
// evaluations.
std::optional<std::int64_t> best_step(const RunRecords& run);

// The page: loss (training and evaluation) and learning rate per step, each evaluation metric
// per evaluation, throughput, the best step marked on every chart, the final summary and the
// run's settings.
std::string render_report(const RunRecords& run, const std::string& title);

// Trainer's TensorBoard tag of a metrics.jsonl key: "eval_accuracy" -> "eval/accuracy" (another
// split S: "eval_S/accuracy"), "lr" -> "train/learning_rate", "loss" -> "train/loss", ...;
// nullopt for keys that are not curves (counts, cumulative timings, "split", "final").
std::optional<std::string> tensorboard_tag(const std::string& key, const std::string& split);

// Writes a metrics.jsonl record's curves as scalars at its step.
void write_tensorboard_record(EventWriter& writer, const nlohmann::json& record, double wall_time);

}  // namespace bertfit::report
