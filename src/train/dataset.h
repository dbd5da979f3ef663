// Resolves DataOptions into labelled examples: a GLUE task's split, or a custom file whose
// label names come from the training file (training) or from the model's id2label (eval).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "data/example.h"
#include "model/config.h"
#include "tokenizer/tokenizer.h"
#include "train/options.h"

namespace bertfit {

struct TaskInfo {
  std::string name;  // task name, or "custom"
  bool regression = false;
  std::vector<std::string> label_names;  // classification: class-id order
  std::vector<std::string> metrics;      // metric names for compute_task_metrics
  std::vector<std::string> eval_splits;  // GLUE: the dev split(s); custom: {"dev"}
};

// The task of a GLUE run (from the task table), or of a custom run with the given labels.
TaskInfo glue_task_info(const std::string& task);
TaskInfo custom_task_info(bool regression, std::vector<std::string> label_names);

// Reads the training examples. For custom files, the label names are collected from the file
// (sorted distinct values) unless `label_names` is given.
LoadedExamples load_train_examples(const DataOptions& data,
                                   const std::optional<std::vector<std::string>>& label_names);
// Reads an evaluation split: for GLUE, `split` of the task folder (e.g. "dev",
// "dev_matched"); for custom data, --dev-file with the given label names.
LoadedExamples load_eval_examples(const DataOptions& data, const std::string& split,
                                  const TaskInfo& task);

// Error naming the model folder when the tokenizer's vocabulary has ids beyond the model's
// word-embedding table (vocab.txt and config.json's vocab_size disagree).
void check_tokenizer_fits(const WordPieceTokenizer& tokenizer, const ModelConfig& config,
                          const std::string& model_dir);

}  // namespace bertfit
