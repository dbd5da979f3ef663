// The GLUE tasks, declared once in a table (glue.cc): for each task the files of every split in
// GLUE's download layout (download_glue_data.py), their columns, the label list in Hugging Face
// datasets' id order, and the metric names of HF's `glue` metric. load_glue_split reads one
// split of one task folder into examples.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "data/example.h"

namespace bertfit {

struct GlueSplitSpec {
  std::string split;   // "train", "dev", "test", "dev_matched", ...
  std::string file;    // file name inside the task folder
  bool header = true;  // whether the file starts with a header line
  // Columns: a header name, or a 0-based index (all digits) for files without a header.
  std::string text_a;
  std::string text_b;  // empty: single-sentence task
  std::string label;   // empty: unlabeled split (GLUE test files)
};

struct GlueTask {
  std::string name;    // HF datasets config name: "mrpc", "sst2", ...
  std::string folder;  // GLUE download folder: "MRPC", "SST-2", ...
  bool is_regression = false;
  std::vector<std::string> labels;       // label strings as in the files, in class-id order
  std::vector<std::string> metrics;      // HF glue metric names, in report order
  std::vector<std::string> eval_splits;  // the splits run_glue evaluates ("dev"; MNLI: both)
  // HF's processors skip rows with too few fields for this task (QqpProcessor does); such rows
  // are always skipped and counted here, whatever the caller's skip_malformed.
  bool skips_malformed = false;
  std::vector<GlueSplitSpec> splits;

  int num_labels() const { return is_regression ? 1 : static_cast<int>(labels.size()); }
  bool has_text_b() const { return !splits.front().text_b.empty(); }
};

// All tasks: cola, sst2, mrpc, qqp, stsb, mnli, qnli, rte, wnli.
const std::vector<GlueTask>& glue_tasks();
// Finds a task by name, ignoring case, '-' and '_' ("SST-2", "sst2", "sts_b" all work); Error
// listing the known tasks otherwise.
const GlueTask& find_glue_task(std::string_view name);
// Error listing the task's splits when the split is unknown.
const GlueSplitSpec& find_glue_split(const GlueTask& task, std::string_view split);

struct GlueLoadOptions {
  bool skip_malformed = false;  // skip rows with too few fields (always on for QQP)
};

// Reads dir/<split file> (dir is the task folder, e.g. glue_data/MRPC). Errors: a missing file
// (names the full path and lists the files the folder should hold), malformed rows (FILE:LINE),
// a label outside the task's label set (FILE:LINE, the label, the allowed labels), a regression
// label that is not a number, no data rows. label_names of the result is the task's label list.
LoadedExamples load_glue_split(const GlueTask& task, const std::string& dir, std::string_view split,
                               const GlueLoadOptions& options = {});
LoadedExamples load_glue_split(std::string_view task, const std::string& dir,
                               std::string_view split, const GlueLoadOptions& options = {});

}  // namespace bertfit
