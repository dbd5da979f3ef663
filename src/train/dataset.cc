// Data-source resolution for train / eval / predict.
#include "train/dataset.h"

#include "base/error.h"
#include "data/custom.h"
#include "data/glue.h"

namespace bertfit {

TaskInfo glue_task_info(const std::string& task_name) {
  const GlueTask& t = find_glue_task(task_name);
  TaskInfo info;
  info.name = t.name;
  info.regression = t.is_regression;
  info.label_names = t.labels;
  info.metrics = t.metrics;
  info.eval_splits = t.eval_splits;
  return info;
}

TaskInfo custom_task_info(bool regression, std::vector<std::string> label_names) {
  TaskInfo info;
  info.name = "custom";
  info.regression = regression;
  info.label_names = std::move(label_names);
  info.metrics = regression ? std::vector<std::string>{"pearson", "spearmanr"}
                            : std::vector<std::string>{"accuracy"};
  info.eval_splits = {"dev"};
  return info;
}

namespace {

LoadedExamples load_custom(const DataOptions& d, const std::string& path,
                           const std::optional<std::vector<std::string>>& label_names,
                           bool labelled) {
  ColumnSpec columns;
  columns.text_a = d.text_a_column;
  if (!d.text_b_column.empty()) columns.text_b = d.text_b_column;
  if (labelled) columns.label = d.label_column;
  CustomFileOptions options;
  options.table.header = !d.no_header;
  options.table.skip_malformed = d.skip_malformed;
  options.regression = d.regression;
  if (!d.regression) options.label_names = label_names;
  return load_custom_file(path, columns, options);
}

}  // namespace

LoadedExamples load_train_examples(const DataOptions& d,
                                   const std::optional<std::vector<std::string>>& label_names) {
  if (!d.task.empty()) {
    GlueLoadOptions options;
    options.skip_malformed = d.skip_malformed;
    return load_glue_split(d.task, d.data_dir, "train", options);
  }
  return load_custom(d, d.train_file, label_names, true);
}

LoadedExamples load_eval_examples(const DataOptions& d, const std::string& split,
                                  const TaskInfo& task) {
  if (!d.task.empty()) {
    GlueLoadOptions options;
    options.skip_malformed = d.skip_malformed;
    return load_glue_split(d.task, d.data_dir, split, options);
  }
  if (d.dev_file.empty()) throw_error("no evaluation data: give --dev-file");
  if (d.label_column.empty()) throw_error("--dev-file needs --label-column");
  return load_custom(d, d.dev_file, task.label_names, true);
}

void check_tokenizer_fits(const WordPieceTokenizer& tokenizer, const ModelConfig& config,
                          const std::string& model_dir) {
  if (tokenizer.vocab_size() > config.vocab_size) {
    throw_error(model_dir, ": the vocabulary has ", tokenizer.vocab_size(),
                " tokens but config.json's vocab_size is ", config.vocab_size,
                "; the tokenizer files do not belong to this model");
  }
}

}  // namespace bertfit
