// Data-source resolution for train / eval / predict.
#include "task/dataset.h"

#include <algorithm>

#include "base/check.h"
#include "base/error.h"
#include "base/log.h"
#include "data/custom.h"
#include "data/glue.h"
#include "data/metrics.h"
#include "model/family.h"

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

TaskInfo token_task_info(std::vector<std::string> tag_names) {
  TaskInfo info;
  info.name = "ner";
  info.head = HeadKind::kTokenClassification;
  info.problem = ProblemType::kSingleLabel;
  info.label_names = std::move(tag_names);
  info.metrics = {"precision", "recall", "f1", "accuracy"};
  info.eval_splits = {"dev"};
  return info;
}

TaskInfo model_task_info(const ModelConfig& config) {
  if (config.head == HeadKind::kTokenClassification) return token_task_info(config.id2label);
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
  t.format = d.format;
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

namespace {

// The model's labels bind a run when its head is trained (in the checkpoint) and they are names
// of its own, not transformers' defaults LABEL_i.
bool has_default_names(const ModelConfig& config) {
  for (std::size_t i = 0; i < config.id2label.size(); ++i) {
    if (config.id2label[i] != cat("LABEL_", i)) return false;
  }
  return true;
}

std::string quoted_list(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += cat(out.empty() ? "" : ", ", "'", n, "'");
  return out;
}

// --labels as given: repeated and/or comma-separated; each name once.
std::vector<std::string> given_labels(const HeadOptions& h) {
  std::vector<std::string> names;
  for (const std::string& item : h.labels) {
    for (std::string& name : split_label_list(item)) {
      if (std::find(names.begin(), names.end(), name) != names.end()) {
        throw_error("--labels names '", name, "' twice");
      }
      names.push_back(std::move(name));
    }
  }
  if (!h.labels.empty() && names.empty()) throw_error("--labels names no label");
  return names;
}

const char* problem_name(ProblemType p) { return custom_task_info(p, {}).problem_type(); }

// The first label of a table's label column (the last) that is not in `names`: (line, label).
std::optional<std::pair<std::int64_t, std::string>> first_unknown(
    const ColumnTable& table, LabelKind kind, const std::vector<std::string>& names) {
  const std::size_t col = table.columns.size() - 1;
  auto known = [&](const std::string& l) {
    return std::find(names.begin(), names.end(), l) != names.end();
  };
  for (std::size_t r = 0; r < table.rows.size(); ++r) {
    const std::string& cell = table.rows[r][col];
    if (kind == LabelKind::kClassList) {
      for (const std::string& l : split_label_list(cell)) {
        if (!known(l)) return std::pair{table.lines[r], l};
      }
    } else if (!known(cell)) {
      return std::pair{table.lines[r], cell};
    }
  }
  return std::nullopt;
}

// Every name is an integer in [0, k).
bool all_class_ids(const std::vector<std::string>& names, int k) {
  for (const std::string& n : names) {
    if (n.empty() || n.size() > 9 || n.find_first_not_of("0123456789") != std::string::npos ||
        std::stoi(n) >= k) {
      return false;
    }
  }
  return true;
}

std::vector<std::string> generic_names(int k) {
  std::vector<std::string> names;
  for (int i = 0; i < k; ++i) names.push_back(cat("LABEL_", i));
  return names;
}

// The problem type a custom file is read as, when the flags or a trained head say it.
std::optional<ProblemType> custom_problem(const DataOptions& d, const HeadOptions& h,
                                          const ModelConfig& model, bool has_head) {
  if (h.problem_type) return h.problem_type;
  if (d.regression || h.num_labels == 1) return ProblemType::kRegression;
  if (!h.labels.empty()) return std::nullopt;  // classes; the data says whether lists
  if (has_head && (!model.problem_type.empty() || model.num_labels == 1)) return model.problem();
  return std::nullopt;
}

// The error for a label the model's trained head does not know.
[[noreturn]] void unknown_to_model(const std::string& where, const std::string& label,
                                   const ModelConfig& model, const std::string& model_dir) {
  throw_error(where, "label '", label, "' is not one of the labels of ", model_dir, " (",
              quoted_list(model.id2label),
              "); give --labels NAME,... to name the head's classes (with "
              "--ignore-mismatched-sizes when their number differs from the model's ",
              model.num_labels, ")");
}

}  // namespace

TrainData load_train_data(const DataOptions& d, const HeadOptions& h, const ModelConfig& model,
                          std::optional<int> head_outputs, const std::string& model_dir) {
  const bool has_head = head_outputs.has_value();
  const std::vector<std::string> labels = given_labels(h);
  if (d.regression && h.problem_type && *h.problem_type != ProblemType::kRegression) {
    throw_error("--regression and --problem-type ", problem_name(*h.problem_type), " disagree");
  }
  if (!labels.empty() && (d.regression || h.num_labels == 1 ||
                          h.problem_type == std::optional(ProblemType::kRegression))) {
    throw_error("--labels names classes, but regression has one output and no classes");
  }
  // The model's label names bind when they name its trained head's outputs.
  const bool model_names = has_head && !model.is_regression() && !has_default_names(model) &&
                           static_cast<int>(model.id2label.size()) == *head_outputs;
  TrainData out;
  if (!d.task.empty()) {
    GlueLoadOptions options;
    options.skip_malformed = d.skip_malformed;
    out.task = glue_task_info(d.task);
    out.loaded = load_glue_split(d.task, d.data_dir, "train", options);
    const ProblemType asked = h.problem_type ? *h.problem_type
                              : d.regression ? ProblemType::kRegression
                                             : out.task.problem;
    if (asked != out.task.problem) {
      throw_error("--problem-type ", problem_name(asked), " does not fit ", out.task.name,
                  ", which is ", out.task.problem_type());
    }
    std::vector<std::string> names = out.task.label_names;
    if (!labels.empty()) {
      std::vector<std::string> a = labels, b = names;
      std::sort(a.begin(), a.end());
      std::sort(b.begin(), b.end());
      if (out.task.regression() || a != b) {
        throw_error("--labels ", quoted_list(labels), " are not the labels of ", out.task.name,
                    out.task.regression() ? " (a regression task)" : cat(": ", quoted_list(names)));
      }
      names = labels;
    } else if (model_names && !out.task.regression()) {
      for (const std::string& n : names) {
        if (std::find(model.id2label.begin(), model.id2label.end(), n) == model.id2label.end()) {
          unknown_to_model(cat(out.task.name, ": "), n, model, model_dir);
        }
      }
      names = model.id2label;
    }
    if (names != out.task.label_names) {
      remap_labels(out.loaded, out.task.label_names, names);
      out.task.label_names = names;
    }
  } else {
    ColumnTable table = read_custom_table(d.train_file, column_spec(d, true), table_options(d));
    const std::optional<ProblemType> problem = custom_problem(d, h, model, has_head);
    std::optional<LabelKind> kind;
    if (problem) kind = label_kind_of(*problem);
    if (kind == LabelKind::kNumber) {
      if (auto bad = first_non_number(table)) {
        throw_error(d.train_file, ":", bad->first, ": label '", bad->second,
                    "' is not a number, but ",
                    d.regression || h.problem_type || h.num_labels == 1
                        ? std::string("the flags say regression")
                        : cat(model_dir, " is a regression model (one output)"),
                    "; for classes give --problem-type single_label_classification (a new head "
                    "with --ignore-mismatched-sizes)");
      }
    }
    if (!kind) kind = infer_label_kind(table, table.columns.size() - 1);
    CustomFileOptions options;
    options.label_kind = kind;
    if (*kind != LabelKind::kNumber) {
      std::vector<std::string> names;
      const std::vector<std::string> found =
          collect_label_names(table, table.columns.size() - 1, *kind);
      if (!labels.empty()) {
        names = labels;
      } else if (model_names) {
        if (auto bad = first_unknown(table, *kind, model.id2label)) {
          unknown_to_model(cat(d.train_file, ":", bad->first, ": "), bad->second, model, model_dir);
        }
        names = model.id2label;
      } else if (h.num_labels > 0) {
        if (all_class_ids(found, h.num_labels)) {
          names = generic_names(h.num_labels);
          options.integer_ids = true;
        } else if (static_cast<int>(found.size()) == h.num_labels) {
          names = found;
        } else {
          throw_error(d.train_file, ": the labels are ", quoted_list(found), " (", found.size(),
                      ") but --num-labels is ", h.num_labels,
                      "; give --labels NAME,... to name all the classes");
        }
      } else {
        names = found;
      }
      if (*kind == LabelKind::kClass && names.size() < 2) {
        throw_error(d.train_file, ": the label column '", d.label_column, "' holds a single value ",
                    quoted_list(names),
                    "; classification needs at least two classes: give them all with --labels "
                    "NAME,NAME,...");
      }
      options.label_names = names;
    }
    out.loaded = examples_from_table(table, column_spec(d, true), options);
    out.task = custom_task_info(problem_of(out.loaded.label_kind), out.loaded.label_names);
    out.task.integer_ids = options.integer_ids;
  }
  const TaskInfo& task = out.task;
  const int outputs = task.num_labels();
  if (h.num_labels > 0 && h.num_labels != outputs) {
    throw_error("--num-labels ", h.num_labels, " but ", task.name, " is ", task.problem_type(),
                task.regression()
                    ? " (one output)"
                    : cat(" over ", outputs, " labels (", quoted_list(task.label_names), ")"));
  }
  if (has_head && *head_outputs != outputs) {
    if (!h.ignore_mismatched_sizes) {
      auto count = [](int n) { return n == 1 ? std::string("1 output") : cat(n, " outputs"); };
      throw_error(model_dir, ": the model's classifier has ", count(*head_outputs), " but ",
                  task.name, " is ", task.problem_type(),
                  task.regression() ? " (one output)" : cat(" over ", outputs, " labels"),
                  "; give --ignore-mismatched-sizes to train a new classifier of ", count(outputs),
                  " on the model's encoder, or use a checkpoint trained for this task");
    }
    out.new_head = true;
  } else if (has_head && !h.problem_type && !model.problem_type.empty() &&
             model.problem() != task.problem) {
    throw_error(model_dir, ": the model's head is ", model.problem_type, " but ", task.name, " is ",
                task.problem_type(), "; give --problem-type ", task.problem_type(),
                " to train this head as such, or use a checkpoint trained for this task");
  }
  out.config = model;
  out.config.head = HeadKind::kSequenceClassification;  // sentence labels: a sequence head
  out.config.num_labels = outputs;
  out.config.id2label = task.regression() ? generic_names(1) : task.label_names;
  out.config.problem_type = task.problem_type();
  return out;
}

TaskInfo in_model_label_order(TaskInfo task, const ModelConfig& config) {
  if (task.regression() || config.id2label == task.label_names) return task;
  std::vector<std::string> a = config.id2label, b = task.label_names;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  if (a == b) task.label_names = config.id2label;
  return task;
}

void remap_labels(LoadedExamples& examples, const std::vector<std::string>& from,
                  const std::vector<std::string>& to) {
  std::vector<int> id(from.size());
  for (std::size_t i = 0; i < from.size(); ++i) {
    auto it = std::find(to.begin(), to.end(), from[i]);
    CHECK(it != to.end(), "label ", from[i], " missing from the new label order");
    id[i] = static_cast<int>(it - to.begin());
  }
  for (Example& e : examples.examples) {
    if (!e.has_label) continue;
    e.label = static_cast<float>(id[static_cast<std::size_t>(e.label)]);
    for (std::int32_t& l : e.label_ids) l = id[static_cast<std::size_t>(l)];
    std::sort(e.label_ids.begin(), e.label_ids.end());
  }
  examples.label_names = to;
}

LoadedExamples load_eval_examples(const DataOptions& d, const std::string& split,
                                  const TaskInfo& task) {
  if (!d.task.empty()) {
    GlueLoadOptions options;
    options.skip_malformed = d.skip_malformed;
    LoadedExamples loaded = load_glue_split(d.task, d.data_dir, split, options);
    if (!loaded.examples.empty() && !loaded.examples.front().has_label) {
      throw_error(loaded.path, ": the ", split, " split of ", task.name,
                  " has no labels, so there is nothing to score; `bertfit predict` gives the "
                  "model's predictions for it");
    }
    if (!task.regression() && loaded.label_names != task.label_names) {
      remap_labels(loaded, loaded.label_names, task.label_names);  // the model's order
    }
    return loaded;
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
              " but ", task.name, " is ", what,
              "; use a model fine-tuned for it (`bertfit train --model MODEL ...` sizes a new "
              "head from the data)");
}

void report_truncation(const std::string& source, const std::vector<EncodedExample>& encoded,
                       int max_seq_len) {
  const Truncation t = count_truncation(encoded);
  if (t.rows == 0 || log_config().rank != 0) return;  // every rank holds every row
  log_warn(source, ": ", t.rows, " of ", encoded.size(), " rows are longer than --max-seq-len ",
           max_seq_len, " tokens and were truncated (", t.tokens, " tokens cut)");
}

void check_tokenizer_fits(const Tokenizer& tokenizer, const ModelConfig& config,
                          const std::string& model_dir) {
  if (tokenizer.vocab_size() > config.vocab_size) {
    throw_error(model_dir, ": the vocabulary has ", tokenizer.vocab_size(),
                " tokens but config.json's vocab_size is ", config.vocab_size,
                "; the tokenizer files do not belong to this model");
  }
  if (tokenizer.kind() != config.family->tokenizer) {
    throw_error(model_dir, ": its tokenizer files are ", tokenizer_kind_name(tokenizer.kind()),
                "'s but a ", config.model_type(), " model uses ",
                tokenizer_kind_name(config.family->tokenizer), "; they do not belong to it");
  }
}

}  // namespace bertfit
