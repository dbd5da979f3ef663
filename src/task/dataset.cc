// Data-source resolution for train / eval / predict.
#include "task/dataset.h"

#include "base/error.h"
#include "data/custom.h"
#include "data/glue.h"
#include "data/metrics.h"

namespace bertfit {

TaskInfo glue_task_info(const std::string& task_name) {
  const GlueTask& t = find_glue_task(task_name);
  TaskInfo info;
  info.name = t.name;
  info.problem = t.is_regression ? ProblemType::kRegression : ProblemType::kSingleLabel;
  info.label_names = t.labels;
  info.metrics = t.metrics;
  info.eval_splits = t.eval_splits;
  return info;
}

const char* TaskInfo::problem_type() const {
  switch (problem) {
    case ProblemType::kRegression:
      return "regression";
    case ProblemType::kMultiLabel:
      return "multi_label_classification";
    case ProblemType::kSingleLabel:
      break;
  }
  return "single_label_classification";
}

TaskInfo custom_task_info(ProblemType problem, std::vector<std::string> label_names) {
  TaskInfo info;
  info.name = "custom";
  info.problem = problem;
  info.label_names = std::move(label_names);
  switch (problem) {
    case ProblemType::kRegression:
      info.metrics = {"pearson", "spearmanr"};
      break;
    case ProblemType::kSingleLabel:
      info.metrics = {"accuracy"};
      break;
    case ProblemType::kMultiLabel:
      info.metrics = {};  // f1_micro, f1_macro, subset_accuracy (multi_label_metrics)
      break;
  }
  info.eval_splits = {"dev"};
  return info;
}

TaskInfo model_task_info(const ModelConfig& config) {
  TaskInfo info = custom_task_info(
      config.problem(), config.is_regression() ? std::vector<std::string>{} : config.id2label);
  bool default_names = true;
  for (std::size_t i = 0; i < config.id2label.size(); ++i)
    default_names = default_names && config.id2label[i] == cat("LABEL_", i);
  info.integer_ids = default_names;
  return info;
}

namespace {

LabelKind label_kind_of(ProblemType problem) {
  switch (problem) {
    case ProblemType::kRegression:
      return LabelKind::kNumber;
    case ProblemType::kMultiLabel:
      return LabelKind::kClassList;
    case ProblemType::kSingleLabel:
      break;
  }
  return LabelKind::kClass;
}

ProblemType problem_of(LabelKind kind) {
  switch (kind) {
    case LabelKind::kNumber:
      return ProblemType::kRegression;
    case LabelKind::kClassList:
      return ProblemType::kMultiLabel;
    case LabelKind::kClass:
      break;
  }
  return ProblemType::kSingleLabel;
}

ColumnSpec column_spec(const DataOptions& d, bool labelled) {
  ColumnSpec columns;
  columns.text_a = d.text_a_column;
  if (!d.text_b_column.empty()) columns.text_b = d.text_b_column;
  if (labelled) columns.label = d.label_column;
  return columns;
}

TableOptions table_options(const DataOptions& d) {
  TableOptions t;
  t.header = !d.no_header;
  t.skip_malformed = d.skip_malformed;
  return t;
}

// The first label of `table` that is not a number, or nullopt.
std::optional<std::pair<std::int64_t, std::string>> first_non_number(const ColumnTable& table) {
  const std::size_t col = table.columns.size() - 1;
  for (std::size_t r = 0; r < table.rows.size(); ++r) {
    if (!parse_float_label(table.rows[r][col]))
      return std::pair{table.lines[r], table.rows[r][col]};
  }
  return std::nullopt;
}

}  // namespace

TrainData load_train_data(const DataOptions& d, const ModelConfig& model,
                          const std::string& model_dir) {
  if (!d.task.empty()) {
    GlueLoadOptions options;
    options.skip_malformed = d.skip_malformed;
    return {glue_task_info(d.task), load_glue_split(d.task, d.data_dir, "train", options)};
  }
  ColumnTable table = read_custom_table(d.train_file, column_spec(d, true), table_options(d));
  std::optional<LabelKind> kind;
  if (d.regression) {
    kind = LabelKind::kNumber;
  } else if (!model.problem_type.empty() || model.num_labels == 1) {
    kind = label_kind_of(model.problem());
  }
  if (kind == LabelKind::kNumber) {
    if (auto bad = first_non_number(table)) {
      throw_error(
          d.train_file, ":", bad->first, ": label '", bad->second, "' is not a number, but ",
          d.regression ? std::string("--regression was given")
                       : cat(model_dir, " is a regression model (one output)"),
          "; for classes, make a classifier with `bertfit init --num-labels K` (K: the number of "
          "distinct labels)",
          d.regression ? "" : " or train from a checkpoint with one output per class");
    }
  }
  CustomFileOptions options;
  options.label_kind = kind;
  TrainData out;
  out.loaded = examples_from_table(table, column_spec(d, true), options);
  out.task = custom_task_info(problem_of(out.loaded.label_kind), out.loaded.label_names);
  return out;
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
  CustomFileOptions options;
  options.table = table_options(d);
  options.label_kind = label_kind_of(task.problem);
  if (!task.regression()) options.label_names = task.label_names;
  options.integer_ids = task.integer_ids;
  return load_custom_file(d.dev_file, column_spec(d, true), options);
}

void check_model_fits_task(const ModelConfig& config, const TaskInfo& task,
                           const std::string& model_dir) {
  const int needed = task.num_labels();
  const bool multi = task.problem == ProblemType::kMultiLabel;
  const bool same_kind = config.problem_type.empty() || config.problem() == task.problem;
  if (config.num_labels == needed && same_kind) return;
  std::string what;
  switch (task.problem) {
    case ProblemType::kRegression:
      what = "regression (labels are numbers with fractions, as run_glue decides; one output)";
      break;
    case ProblemType::kMultiLabel:
      what = cat("multi-label classification over ", needed, " labels");
      break;
    case ProblemType::kSingleLabel:
      what = cat("single-label classification over ", needed, " labels");
      break;
  }
  throw_error(model_dir, ": the model has num_labels = ", config.num_labels,
              config.problem_type.empty() ? "" : cat(" (problem_type ", config.problem_type, ")"),
              " but ", task.name, " is ", what, "; make one with `bertfit init --num-labels ",
              needed, multi ? " --set problem_type=multi_label_classification" : "",
              "` or use a checkpoint trained for this task");
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
