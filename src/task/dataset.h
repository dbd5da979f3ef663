// Resolves DataOptions into labelled examples: a GLUE task's split, or a custom file whose
// label names come from the training file (training) or from the model's id2label (eval).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "data/example.h"
#include "flags/groups.h"
#include "model/config.h"
#include "tokenizer/tokenizer.h"

namespace bertfit {

struct TaskInfo {
  std::string name;  // task name, or "custom"
  ProblemType problem = ProblemType::kSingleLabel;
  std::vector<std::string> label_names;  // classification: class-id order
  std::vector<std::string> metrics;      // single-label / regression: compute_task_metrics names
  std::vector<std::string> eval_splits;  // GLUE: the dev split(s); custom: {"dev"}
  // The model's default names LABEL_i also accept "i" in data (LabelScheme::integer_ids).
  bool integer_ids = false;

  bool regression() const { return problem == ProblemType::kRegression; }
  int num_labels() const { return regression() ? 1 : static_cast<int>(label_names.size()); }
  // The problem_type string transformers writes into config.json.
  const char* problem_type() const;
};

// The task of a GLUE run (from the task table), or of custom data with the given labels.
TaskInfo glue_task_info(const std::string& task);
TaskInfo custom_task_info(ProblemType problem, std::vector<std::string> label_names);
// The task a model was fine-tuned for, from its config.json: problem type and label names.
TaskInfo model_task_info(const ModelConfig& config);

struct TrainData {
  TaskInfo task;
  LoadedExamples loaded;
};

// Reads the training examples and decides the task. GLUE: the task table. Custom files, as
// transformers and run_glue decide: --regression, else the model's problem_type (regression,
// multi_label_classification) or its single output, else the data (JSON lists: multi-label;
// numbers with fractions: regression; anything else: single-label with the sorted distinct
// labels as classes). Errors name the file and line, and say what fits the data.
TrainData load_train_data(const DataOptions& data, const ModelConfig& model,
                          const std::string& model_dir);
// Reads an evaluation split: for GLUE, `split` of the task folder (e.g. "dev",
// "dev_matched"); for custom data, --dev-file read as the task says.
LoadedExamples load_eval_examples(const DataOptions& data, const std::string& split,
                                  const TaskInfo& task);

// Error naming the model folder, with the `bertfit init` line that fits, when the model's
// outputs do not fit the task (e.g. num_labels 2 for a regression file).
void check_model_fits_task(const ModelConfig& config, const TaskInfo& task,
                           const std::string& model_dir);

// Error naming the model folder when the tokenizer's vocabulary has ids beyond the model's
// word-embedding table (vocab.txt and config.json's vocab_size disagree).
void check_tokenizer_fits(const WordPieceTokenizer& tokenizer, const ModelConfig& config,
                          const std::string& model_dir);

}  // namespace bertfit
