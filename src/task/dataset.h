// Resolves DataOptions into labelled examples: a GLUE task's split, or a custom file whose
// label names come from the training file (training) or from the model's id2label (eval).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/example.h"
#include "data/tagged.h"
#include "flags/groups.h"
#include "model/config.h"
#include "tokenizer/tokenizer.h"

namespace bertfit {

struct RetrievalJudgements;  // task/retrieval.h

struct TaskInfo {
  std::string name;  // task name, "custom", or "ner" (tagged data)
  // Token classification: a tag per word (label_names the tags), scored by entity (seqeval).
  HeadKind head = HeadKind::kSequenceClassification;
  ProblemType problem = ProblemType::kSingleLabel;
  std::vector<std::string> label_names;  // classification: class-id order
  std::vector<std::string> metrics;      // single-label / regression: compute_task_metrics names
  std::vector<std::string> eval_splits;  // GLUE: the dev split(s); custom: {"dev"}
  // The model's default names LABEL_i also accept "i" in data (LabelScheme::integer_ids).
  bool integer_ids = false;
  // A sentence embedder evaluated on a retrieval set (task/retrieval_data.h): the examples are
  // its queries then its corpus, judged by this. Unset: scored pairs (task/pair_data.h).
  std::shared_ptr<const RetrievalJudgements> retrieval;

  bool regression() const { return problem == ProblemType::kRegression; }
  int num_labels() const { return regression() ? 1 : static_cast<int>(label_names.size()); }
  // The problem_type string transformers writes into config.json.
  const char* problem_type() const;
};

// The task of a GLUE run (from the task table), or of custom data with the given labels.
TaskInfo glue_task_info(const std::string& task);
TaskInfo custom_task_info(ProblemType problem, std::vector<std::string> label_names);
// Token classification over these tags (metrics: seqeval's precision, recall, f1, accuracy).
TaskInfo token_task_info(std::vector<std::string> tag_names);
// The task a model was fine-tuned for, from its config.json: problem type and label names.
// (A token classifier's: token_task_info of its id2label.)
TaskInfo model_task_info(const ModelConfig& config);

struct TrainData {
  TaskInfo task;
  LoadedExamples loaded;
  LoadedTagged tagged;    // token classification (task/tagged_data.h): the tagged sentences
  ModelConfig config;     // the model's, with the task's labels and problem type
  bool new_head = false;  // the checkpoint's classifier has another size: start it anew
};

// Reads the training examples and decides the task and the head, as run_glue does. The
// problem type: the GLUE task table; for custom files --problem-type (or --regression, or
// --num-labels 1), else a trained model's problem_type or its single output, else the data
// (JSON lists: multi-label; numbers with fractions: regression; else single-label). The labels:
// --labels in their order; else the model's when it has a trained head (head_outputs) with
// label names of its own and the data's labels are among them (its ids kept; a data label it
// lacks is an error naming it); else the task's, or the data's sorted (--num-labels K with
// labels 0..K-1: K classes LABEL_0..LABEL_{K-1}). A trained head of another size is an error
// unless head.ignore_mismatched_sizes; a model without one gets a new head (model_io.h).
// head_outputs: checkpoint_head_outputs of the model. Errors name the file and line, the flag
// or the model folder.
TrainData load_train_data(const DataOptions& data, const HeadOptions& head,
                          const ModelConfig& model, std::optional<int> head_outputs,
                          const std::string& model_dir);

// The task as the model sees it: a GLUE task whose label names the model holds in another
// order takes the model's order (evaluation then compares in the model's ids). Unchanged
// otherwise.
TaskInfo in_model_label_order(TaskInfo task, const ModelConfig& config);

// Re-expresses class ids of `examples` read under `from` names as ids under `to` (same names,
// another order).
void remap_labels(LoadedExamples& examples, const std::vector<std::string>& from,
                  const std::vector<std::string>& to);

// Reads an evaluation split: for GLUE, `split` of the task folder (e.g. "dev",
// "dev_matched"); for custom data, --dev-file read as the task says.
LoadedExamples load_eval_examples(const DataOptions& data, const std::string& split,
                                  const TaskInfo& task);

// Error naming the model folder when the model's outputs do not fit the task (e.g. num_labels 2
// for a regression task): eval needs a model fine-tuned for it.
void check_model_fits_task(const ModelConfig& config, const TaskInfo& task,
                           const std::string& model_dir);

// On stderr when truncation cut any row of `source` (a file or split): "FILE: 3 of 100 rows are
// longer than --max-seq-len 128 tokens and were truncated (1234 tokens cut)". Silent otherwise.
void report_truncation(const std::string& source, const std::vector<EncodedExample>& encoded,
                       int max_seq_len);

// Error naming the model folder when the tokenizer's vocabulary has ids beyond the model's
// word-embedding table (vocab.txt and config.json's vocab_size disagree), or when the tokenizer
// is of another kind than the model's family uses (model/family.h).
void check_tokenizer_fits(const Tokenizer& tokenizer, const ModelConfig& config,
                          const std::string& model_dir);

}  // namespace bertfit
