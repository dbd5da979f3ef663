// Evaluation and prediction loops.
#include "task/evaluate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/check.h"
#include "data/metrics.h"
#include "data/seqeval.h"
#include "kernels/loss.h"
#include "model/head.h"
#include "task/retrieval.h"
#include "task/similarity.h"

namespace bertfit {

std::vector<float> predict_logits(const BertModel& model, const float* params,
                                  const std::vector<EncodedExample>& examples, int batch_size,
                                  int pad_to_multiple_of, Activations* scratch,
                                  const ProgressFn& progress) {
  const int K = model_head(model.config()).output_width(model.config());
  const std::int64_t n = static_cast<std::int64_t>(examples.size());
  std::vector<std::int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return examples[a].ids.size() < examples[b].ids.size();
  });
  const bool tokens = model_head(model.config()).outputs_per_token();
  const std::vector<std::int64_t> before =
      tokens ? token_rows_before(examples) : std::vector<std::int64_t>{};
  std::vector<float> logits((tokens ? before.back() : n) * K);
  Activations own;
  Activations& acts = scratch != nullptr ? *scratch : own;
  BatchOptions options;
  options.pad_to_multiple_of = pad_to_multiple_of;
  options.max_len = model.config().max_tokens();
  ModelWeights weights = model.make_weights();
  weights.prepare(params, /*with_backward=*/false);  // the parameters do not change meanwhile
  for (std::int64_t first = 0; first < n; first += batch_size) {
    std::int64_t count = std::min<std::int64_t>(batch_size, n - first);
    Batch batch = make_batch(examples, std::span(order).subspan(first, count), options);
    ModelInput in{batch.B, batch.T, batch.input_ids.data(), batch.token_type_ids.data(),
                  batch.attention_mask.data()};
    model.forward(weights, in, DropoutState{}, acts);
    for (int b = 0; b < batch.B && tokens; ++b) {  // the example's tokens, rows b·T ..
      const std::int64_t i = batch.example_index[b];
      const std::int64_t len = before[i + 1] - before[i];
      const float* rows = acts.logits.data() + std::int64_t{b} * batch.T * K;
      std::copy(rows, rows + len * K, logits.begin() + before[i] * K);
    }
    for (int b = 0; b < batch.B && !tokens; ++b) {
      std::copy(acts.logits.data() + std::int64_t{b} * K,
                acts.logits.data() + std::int64_t{b + 1} * K,
                logits.begin() + batch.example_index[b] * K);
    }
    if (progress) progress(first + count, n);
  }
  return logits;
}

std::vector<std::int64_t> token_rows_before(const std::vector<EncodedExample>& examples) {
  std::vector<std::int64_t> before(examples.size() + 1, 0);
  for (std::size_t i = 0; i < examples.size(); ++i)
    before[i + 1] = before[i] + static_cast<std::int64_t>(examples[i].ids.size());
  return before;
}

std::vector<float> predictions_from_logits(const std::vector<float>& logits, int K,
                                           bool regression) {
  const std::size_t n = logits.size() / K;
  std::vector<float> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const float* row = logits.data() + i * K;
    out[i] = regression ? row[0] : static_cast<float>(std::max_element(row, row + K) - row);
  }
  return out;
}

namespace {

// Token classification: the words' tags (each word's first sub-token) against the predicted
// ones, scored as run_ner's compute_metrics (seqeval).
EvalResult score_token_logits(const std::vector<float>& logits,
                              const std::vector<EncodedExample>& examples, const TaskInfo& task,
                              int K) {
  const std::vector<std::int64_t> before = token_rows_before(examples);
  CHECK(static_cast<std::int64_t>(logits.size()) == before.back() * K, "token logits of ",
        logits.size() / K, " rows for ", before.back(), " tokens");
  std::vector<std::vector<std::string>> truth, predicted;
  double loss = 0;
  std::int64_t labelled = 0;
  for (std::size_t i = 0; i < examples.size(); ++i) {
    const EncodedExample& e = examples[i];
    CHECK(e.token_labels.size() == e.ids.size(), "example ", i, " has no token labels");
    std::vector<std::string> t, p;
    for (std::size_t j = 0; j < e.ids.size(); ++j) {
      const std::int32_t y = e.token_labels[j];
      if (y < 0) continue;  // -100: not a word's first sub-token
      CHECK(y < K, "tag id ", y, " outside [0,", K, ")");
      const float* row = logits.data() + (before[i] + static_cast<std::int64_t>(j)) * K;
      double mx = *std::max_element(row, row + K), sum = 0;
      for (int k = 0; k < K; ++k) sum += std::exp(double{row[k]} - mx);
      loss += mx + std::log(sum) - row[y];
      ++labelled;
      t.push_back(task.label_names[y]);
      p.push_back(task.label_names[std::max_element(row, row + K) - row]);
    }
    truth.push_back(std::move(t));
    predicted.push_back(std::move(p));
  }
  EvalResult r;
  r.examples = static_cast<std::int64_t>(examples.size());
  r.loss = labelled == 0 ? 0.0 : loss / static_cast<double>(labelled);
  const SeqevalScores s = seqeval_scores(truth, predicted);
  r.metrics = {
      {"precision", s.precision}, {"recall", s.recall}, {"f1", s.f1}, {"accuracy", s.accuracy}};
  for (const EntityTypeScores& type : s.types) r.metrics.emplace_back(type.type + "_f1", type.f1);
  return r;
}

}  // namespace

namespace {

// Scored pairs by column (task/pair_data.h): how the embeddings' similarities rank them
// (task/similarity.h). No loss: the evaluation is not the training loss.
EvalResult score_pair_embeddings(const std::vector<float>& embeddings,
                                 const std::vector<EncodedExample>& examples) {
  CHECK(examples.size() % 2 == 0 && !examples.empty(), "scored pairs by column: ", examples.size(),
        " texts");
  const std::size_t n = examples.size() / 2;
  const int D = static_cast<int>(embeddings.size() / examples.size());
  std::vector<double> scores(n);
  for (std::size_t i = 0; i < n; ++i) scores[i] = examples[i].label;
  EvalResult r;
  r.examples = static_cast<std::int64_t>(n);
  r.loss = std::nan("");
  r.metrics = similarity_metrics(embeddings, D, scores);
  return r;
}

// A retrieval set's queries then its documents (task/retrieval_data.h): how the embeddings rank
// each query's documents (task/retrieval.h). `examples` counts the queries scored.
EvalResult score_retrieval_embeddings(const std::vector<float>& embeddings,
                                      const std::vector<EncodedExample>& examples,
                                      const RetrievalJudgements& judgements) {
  CHECK(static_cast<std::int64_t>(examples.size()) == judgements.queries + judgements.corpus,
        examples.size(), " texts for ", judgements.queries, " queries and ", judgements.corpus,
        " documents");
  const int D = static_cast<int>(embeddings.size() / examples.size());
  EvalResult r;
  r.examples = judgements.queries;
  r.loss = std::nan("");
  r.metrics = retrieval_metrics(embeddings, D, judgements);
  return r;
}

}  // namespace

EvalResult score_logits(const std::vector<float>& logits,
                        const std::vector<EncodedExample>& examples, const TaskInfo& task, int K) {
  if (task.head == HeadKind::kTokenClassification) {
    return score_token_logits(logits, examples, task, K);
  }
  if (task.head == HeadKind::kEmbedding) {
    return task.retrieval ? score_retrieval_embeddings(logits, examples, *task.retrieval)
                          : score_pair_embeddings(logits, examples);
  }
  const std::size_t n = examples.size();
  EvalResult r;
  r.examples = static_cast<std::int64_t>(n);
  if (task.problem == ProblemType::kMultiLabel) {
    // The training loss (binary cross-entropy averaged over n·K); a label is predicted when its
    // sigmoid exceeds 0.5.
    std::vector<float> truth(n * K, 0.0f), probs(n * K), predicted(n * K);
    for (std::size_t i = 0; i < n; ++i)
      for (std::int32_t id : examples[i].label_ids) truth[i * K + id] = 1.0f;
    if (n > 0) {
      r.loss = bce_with_logits_forward(probs.data(), logits.data(), truth.data(),
                                       static_cast<int>(n), K);
    }
    for (std::size_t j = 0; j < n * K; ++j) predicted[j] = probs[j] > 0.5f ? 1.0f : 0.0f;
    r.metrics = multi_label_metrics(predicted, truth, K);
    return r;
  }
  std::vector<float> labels(n);
  for (std::size_t i = 0; i < n; ++i) labels[i] = examples[i].label;
  double loss = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const float* row = logits.data() + i * K;
    if (task.regression()) {
      loss += std::pow(double{row[0]} - labels[i], 2);
    } else {
      double mx = *std::max_element(row, row + K), sum = 0;
      for (int k = 0; k < K; ++k) sum += std::exp(double{row[k]} - mx);
      loss += mx + std::log(sum) - row[static_cast<int>(labels[i])];
    }
  }
  r.loss = n == 0 ? 0.0 : loss / static_cast<double>(n);
  auto predictions = predictions_from_logits(logits, K, task.regression());
  r.metrics = compute_task_metrics(task.metrics, predictions, labels);
  return r;
}

std::vector<std::string> task_metric_names(const TaskInfo& task) {
  if (task.problem == ProblemType::kMultiLabel) return {"f1_micro", "f1_macro", "subset_accuracy"};
  // Token classification: also <type>_f1 per entity type of the data, which the data decides.
  if (task.head == HeadKind::kTokenClassification || task.head == HeadKind::kEmbedding) {
    return task.metrics;
  }
  std::vector<std::string> names = task.metrics;
  if (names.size() > 1) names.push_back("combined_score");
  return names;
}

EvalResult evaluate(const BertModel& model, const float* params,
                    const std::vector<EncodedExample>& examples, const TaskInfo& task,
                    int batch_size, int pad_to_multiple_of, const ProgressFn& progress) {
  std::vector<float> logits =
      predict_logits(model, params, examples, batch_size, pad_to_multiple_of, nullptr, progress);
  return score_logits(logits, examples, task, model.config().num_labels);
}

}  // namespace bertfit
