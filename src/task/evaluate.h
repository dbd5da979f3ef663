// Inference over a data set in eval mode (no dropout): logits for every example, predictions
// (argmax, or the score for regression), and the task's metrics.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "data/batch.h"
#include "model/bert.h"
#include "task/dataset.h"

namespace bertfit {

// Logits (n,K) for every encoded example (a token head: a row per token of each example, the
// examples' rows one after the other, token_rows_before gives where each starts), batch_size at a
// time. Examples are batched in order
// of length (less padding); the result is in the original order. `scratch`, if given, is used
// for the activations (the trainer passes its own: evaluation then needs no memory of its own).
// `progress(done, total)`, if set, is called after each batch.
using ProgressFn = std::function<void(std::int64_t done, std::int64_t total)>;
std::vector<float> predict_logits(const BertModel& model, const float* params,
                                  const std::vector<EncodedExample>& examples, int batch_size,
                                  int pad_to_multiple_of, Activations* scratch = nullptr,
                                  const ProgressFn& progress = {});

// Where each example's rows start in a token head's logits: the prefix sums of the examples'
// lengths (n + 1 entries).
std::vector<std::int64_t> token_rows_before(const std::vector<EncodedExample>& examples);

// Class id (argmax) per row, or the single output for regression.
std::vector<float> predictions_from_logits(const std::vector<float>& logits, int K,
                                           bool regression);

struct EvalResult {
  std::vector<std::pair<std::string, double>> metrics;
  double loss = 0;  // mean cross-entropy / MSE over the examples; NaN: none (embeddings)
  std::int64_t examples = 0;
};

// The names of the metrics score_logits reports for the task, in its order (without "eval_").
std::vector<std::string> task_metric_names(const TaskInfo& task);

// Loss and metrics of logits (n,K) against the examples' labels. Token classification: the
// labelled tokens (token_labels not -100: each word's first sub-token), their mean
// cross-entropy, and seqeval's entity-level precision, recall and F1 (micro) with the tag
// accuracy over the words, as run_ner reports them (per entity type too: `<type>_f1`).
// A sentence embedder (logits: the embeddings): the similarity metrics of scored pairs
// (task/similarity.h), or with task.retrieval the retrieval metrics of its queries and corpus
// (task/retrieval.h); no loss (NaN).
EvalResult score_logits(const std::vector<float>& logits,
                        const std::vector<EncodedExample>& examples, const TaskInfo& task, int K);

EvalResult evaluate(const BertModel& model, const float* params,
                    const std::vector<EncodedExample>& examples, const TaskInfo& task,
                    int batch_size, int pad_to_multiple_of, const ProgressFn& progress = {});

}  // namespace bertfit
