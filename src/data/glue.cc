// The GLUE task table and split loading (see glue.h). Column choices follow the files of GLUE's
// download layout and HF transformers' glue processors (which read the same files):
//   CoLA  train/dev have no header: 4 columns source, label, original mark, sentence.
//   MRPC  "Quality #1 ID #2 ID #1 String #2 String"; test has "index" in place of Quality.
//   QQP   "id qid1 qid2 question1 question2 is_duplicate"; test "id question1 question2".
//         train_subset (shared/data/glue/QQP: a random subset of GLUE QQP train, not a GLUE
//         split) has no header: the same six columns by index, 3, 4 and 5.
//   STS-B "index genre filename year old_index source1 source2 sentence1 sentence2 score".
//   MNLI  sentence1, sentence2 and gold_label (the last column, as HF's MnliProcessor).
//   Others "index sentence1 sentence2 label" (RTE, WNLI), "index question sentence label"
//         (QNLI), "sentence label" (SST-2); test files have an index and no label.
#include "data/glue.h"

#include <cctype>

#include "base/error.h"
#include "base/file.h"

namespace bertfit {
namespace {

std::vector<GlueTask> make_glue_tasks() {
  const std::vector<std::string> binary = {"0", "1"};
  const std::vector<std::string> entail2 = {"entailment", "not_entailment"};
  std::vector<GlueTask> t;
  // name, folder, regression, labels, metrics, eval splits, skips malformed, splits
  t.push_back({"cola",
               "CoLA",
               false,
               binary,
               {"matthews_correlation"},
               {"dev"},
               false,
               {{"train", "train.tsv", false, "3", "", "1"},
                {"dev", "dev.tsv", false, "3", "", "1"},
                {"test", "test.tsv", true, "sentence", "", ""}}});
  t.push_back({"sst2",
               "SST-2",
               false,
               binary,
               {"accuracy"},
               {"dev"},
               false,
               {{"train", "train.tsv", true, "sentence", "", "label"},
                {"dev", "dev.tsv", true, "sentence", "", "label"},
                {"test", "test.tsv", true, "sentence", "", ""}}});
  t.push_back({"mrpc",
               "MRPC",
               false,
               binary,
               {"accuracy", "f1"},
               {"dev"},
               false,
               {{"train", "train.tsv", true, "#1 String", "#2 String", "Quality"},
                {"dev", "dev.tsv", true, "#1 String", "#2 String", "Quality"},
                {"test", "test.tsv", true, "#1 String", "#2 String", ""}}});
  t.push_back({"qqp",
               "QQP",
               false,
               binary,
               {"accuracy", "f1"},
               {"dev"},
               true,
               {{"train", "train.tsv", true, "question1", "question2", "is_duplicate"},
                {"dev", "dev.tsv", true, "question1", "question2", "is_duplicate"},
                {"test", "test.tsv", true, "question1", "question2", ""},
                {"train_subset", "train_subset.tsv", false, "3", "4", "5"}}});
  t.push_back({"stsb",
               "STS-B",
               true,
               {},
               {"pearson", "spearmanr"},
               {"dev"},
               false,
               {{"train", "train.tsv", true, "sentence1", "sentence2", "score"},
                {"dev", "dev.tsv", true, "sentence1", "sentence2", "score"},
                {"test", "test.tsv", true, "sentence1", "sentence2", ""}}});
  t.push_back(
      {"mnli",
       "MNLI",
       false,
       {"entailment", "neutral", "contradiction"},
       {"accuracy"},
       {"dev_matched", "dev_mismatched"},
       false,
       {{"train", "train.tsv", true, "sentence1", "sentence2", "gold_label"},
        {"dev_matched", "dev_matched.tsv", true, "sentence1", "sentence2", "gold_label"},
        {"dev_mismatched", "dev_mismatched.tsv", true, "sentence1", "sentence2", "gold_label"},
        {"test_matched", "test_matched.tsv", true, "sentence1", "sentence2", ""},
        {"test_mismatched", "test_mismatched.tsv", true, "sentence1", "sentence2", ""}}});
  t.push_back({"qnli",
               "QNLI",
               false,
               entail2,
               {"accuracy"},
               {"dev"},
               false,
               {{"train", "train.tsv", true, "question", "sentence", "label"},
                {"dev", "dev.tsv", true, "question", "sentence", "label"},
                {"test", "test.tsv", true, "question", "sentence", ""}}});
  t.push_back({"rte",
               "RTE",
               false,
               entail2,
               {"accuracy"},
               {"dev"},
               false,
               {{"train", "train.tsv", true, "sentence1", "sentence2", "label"},
                {"dev", "dev.tsv", true, "sentence1", "sentence2", "label"},
                {"test", "test.tsv", true, "sentence1", "sentence2", ""}}});
  t.push_back({"wnli",
               "WNLI",
               false,
               binary,
               {"accuracy"},
               {"dev"},
               false,
               {{"train", "train.tsv", true, "sentence1", "sentence2", "label"},
                {"dev", "dev.tsv", true, "sentence1", "sentence2", "label"},
                {"test", "test.tsv", true, "sentence1", "sentence2", ""}}});
  return t;
}

std::string normalize_task_name(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (c == '-' || c == '_') continue;
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

std::string split_files(const GlueTask& task) {
  std::string out;
  for (const auto& s : task.splits) out += cat(out.empty() ? "" : ", ", s.file);
  return out;
}

}  // namespace

const std::vector<GlueTask>& glue_tasks() {
  static const std::vector<GlueTask> tasks = make_glue_tasks();
  return tasks;
}

const GlueTask& find_glue_task(std::string_view name) {
  const std::string key = normalize_task_name(name);
  std::string known;
  for (const auto& task : glue_tasks()) {
    if (task.name == key) return task;
    known += cat(known.empty() ? "" : ", ", task.name);
  }
  throw_error("unknown GLUE task '", name, "'; known tasks: ", known);
}

const GlueSplitSpec& find_glue_split(const GlueTask& task, std::string_view split) {
  std::string known;
  for (const auto& s : task.splits) {
    if (s.split == split) return s;
    known += cat(known.empty() ? "" : ", ", s.split);
  }
  throw_error("unknown split '", split, "' for GLUE task ", task.name, "; splits: ", known);
}

LoadedExamples load_glue_split(const GlueTask& task, const std::string& dir, std::string_view split,
                               const GlueLoadOptions& options) {
  const GlueSplitSpec& spec = find_glue_split(task, split);
  const std::string path = join_path(dir, spec.file);
  if (!path_exists(path)) {
    throw_error("GLUE ", task.folder, " ", spec.split, " file not found: ", path, "; the ",
                task.name, " folder (GLUE's download layout, e.g. glue_data/", task.folder,
                ") should contain ", split_files(task), " (only the splits you use are needed)");
  }
  std::vector<std::string> columns = {spec.text_a};
  if (!spec.text_b.empty()) columns.push_back(spec.text_b);
  if (!spec.label.empty()) columns.push_back(spec.label);
  TableOptions table_options;
  table_options.format = TableFormat::kTsv;
  table_options.header = spec.header;
  table_options.skip_malformed = options.skip_malformed || task.skips_malformed;
  ColumnTable table = read_columns(path, columns, table_options);
  require_rows(table);
  LabelScheme scheme{task.is_regression ? LabelKind::kNumber : LabelKind::kClass, task.labels};
  LoadedExamples out;
  out.path = path;
  out.examples = examples_from_columns(table, !spec.text_b.empty(), !spec.label.empty(), scheme);
  out.label_names = task.labels;
  out.skipped_rows = table.skipped_rows;
  return out;
}

LoadedExamples load_glue_split(std::string_view task, const std::string& dir,
                               std::string_view split, const GlueLoadOptions& options) {
  return load_glue_split(find_glue_task(task), dir, split, options);
}

}  // namespace bertfit
