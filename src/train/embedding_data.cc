// Sentence-embedding training's data and model (see embedding_data.h).
#include "train/embedding_data.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file.h"
#include "base/log.h"
#include "io/json.h"
#include "model/model_io.h"
#include "task/pair_data.h"
#include "task/retrieval_data.h"
#include "task/similarity.h"
#include "tokenizer/tokenizer.h"

namespace bertfit {
namespace {

// Flags that shape a classifier, which an embedding run has no use for.
void refuse_classification_flags(const TrainOptions& o) {
  const HeadOptions& h = o.head;
  const char* given = h.num_labels != 0           ? "--num-labels"
                      : !h.labels.empty()         ? "--labels"
                      : h.problem_type            ? "--problem-type"
                      : h.ignore_mismatched_sizes ? "--ignore-mismatched-sizes"
                      : o.data.regression         ? "--regression"
                      : o.label_smoothing != 0    ? "--label-smoothing-factor"
                      : o.class_weights.kind != ClassWeights::Kind::kNone ? "--class-weights"
                      : !o.data.tokens_column.empty() || !o.data.tags_column.empty()
                          ? "--tokens-column/--tags-column"
                          : nullptr;
  if (given != nullptr) {
    throw_error(given,
                " is for training a classifier; this run trains sentence embeddings "
                "(--objective classification trains a classifier)");
  }
}

std::vector<EncodedExample> encode_texts(const Tokenizer& tokenizer, const PairSet& set,
                                         int max_len) {
  std::vector<EncodedExample> encoded = encode_examples(tokenizer, set.texts, max_len);
  report_truncation(set.path, encoded, max_len);
  return encoded;
}

}  // namespace

bool trains_embeddings(const TrainOptions& o, const std::string& source) {
  switch (o.embedding.objective) {
    case Objective::kEmbedding:
      return true;
    case Objective::kClassification:
      return false;
    case Objective::kAuto:
      break;
  }
  return path_exists(join_path(source, "modules.json"));
}

SentenceTransformerSpec plain_encoder_modules(const TrainOptions& o, const ModelConfig& config) {
  SentenceTransformerSpec spec;
  spec.pooling = {o.embedding.pooling.value_or(Pooling::kMean)};
  spec.word_embedding_dimension = config.hidden;
  spec.max_seq_length = o.compute.max_seq_len;
  return spec;
}

RunData load_embedding_data(const TrainOptions& o, const std::string& source) {
  refuse_classification_flags(o);
  const EmbeddingTrainOptions& e = o.embedding;
  const std::string config_path = join_path(source, "config.json");
  if (is_directory(source) && !path_exists(config_path)) {
    throw_error(source, ": no config.json in the model folder");
  }
  model_weights_path(source);
  ModelConfig config = parse_model_config_json(read_json_file(config_path), config_path);
  const std::optional<SentenceTransformerSpec> st = read_sentence_transformer(source);
  if (st) {
    // (A checkpoint of a --pooling run holds the modules it wrote: the same pooling.)
    if (e.pooling && st->pooling != std::vector<Pooling>{*e.pooling}) {
      throw_error("--pooling ", pooling_name(*e.pooling), ": ", source,
                  " is a sentence-transformers folder, whose 1_Pooling/config.json decides the "
                  "pooling");
    }
    use_sentence_transformer(*st, source, config);
  } else {
    config.head = HeadKind::kEmbedding;
    config.pooling = {e.pooling.value_or(Pooling::kMean)};
    config.normalize = false;
  }
  config.other_architecture.clear();  // sentence-transformers loads the base model of any class
  if (!(e.loss_scale > 0) || !std::isfinite(e.loss_scale)) {
    throw_error("--loss-scale ", e.loss_scale, ": must be a positive number");
  }
  const bool scores_given = !o.data.label_column.empty();
  const PairLoss loss =
      e.loss.value_or(scores_given ? PairLoss::kCoSENT : PairLoss::kMultipleNegativesRanking);
  if (pair_loss_scored(loss) && !scores_given) {
    throw_error("--loss ", pair_loss_name(loss), " needs scored pairs: give --label-column");
  }
  // With mnrl, --label-column names only the dev file's scores.
  const bool scored_data = pair_loss_scored(loss);
  const PairSet train = load_pair_train(o.data, e.negative_columns, scored_data);
  const std::string& model = o.model_folder();
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(model);
  check_tokenizer_fits(*tokenizer, config, model);
  if (st && st->do_lower_case) tokenizer->set_lowercase_input(true);  // as the module's forward
  int max_len = o.compute.max_seq_len;
  if (!o.max_seq_len_given && st && st->max_seq_length) {
    // fit() cuts texts at the folder's max_seq_length.
    max_len = std::min(*st->max_seq_length, config.max_tokens());
    log_info("texts are cut at ", max_len, " tokens (", source,
             "'s max_seq_length; --max-seq-len sets another)");
  }
  if (max_len > config.max_tokens()) {
    throw_error("--max-seq-len ", max_len, " exceeds the ", config.max_tokens(),
                " tokens the model's max_position_embeddings (", config.max_positions, ") hold in ",
                model);
  }
  const TaskInfo task = embedding_task_info();
  RunData data;
  data.task = task;
  data.config = config;
  data.train = encode_texts(*tokenizer, train, max_len);
  data.texts_per_sample = train.columns;
  data.pair_loss = loss;
  data.loss_scale = e.loss_scale;
  const bool retrieval = wants_retrieval(o.data);
  const bool evaluates = o.eval_every.when != EvalEvery::When::kNever;
  if (evaluates && retrieval) {
    const RetrievalSet set = load_retrieval_set(o.data);
    data.task = retrieval_task_info(set.judgements);
    data.dev.emplace_back("dev", encode_retrieval_set(*tokenizer, set, max_len));
  } else if (evaluates && !o.data.dev_file.empty()) {
    if (o.data.label_column.empty()) {
      throw_error(
          "--dev-file: the similarity evaluation reads scored pairs; give --label-column "
          "(the dev file's score column, also read as the training file's scores)");
    }
    const PairSet dev = load_scored_pairs(o.data, o.data.dev_file);
    data.dev.emplace_back("dev", encode_texts(*tokenizer, dev, max_len));
  }
  return data;
}

}  // namespace bertfit
