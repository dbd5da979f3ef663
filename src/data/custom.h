// Generic labelled data files (TSV, CSV, JSONL) with user-chosen columns: the counterpart of HF
// run_glue's --train_file/--validation_file. For classification the label list is either given
// or collected from the file (sorted distinct labels, as run_glue does for the train file); the
// train file's list is then passed in for the dev file so both map labels to the same ids.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "data/example.h"

namespace bertfit {

// Column specs: a header name, a 0-based index (all digits) or, for JSONL, a key.
struct ColumnSpec {
  std::string text_a;
  std::optional<std::string> text_b;
  std::optional<std::string> label;  // unset: unlabeled data (prediction)
};

struct CustomFileOptions {
  TableOptions table;  // format (default from extension), header, skip_malformed
  // What the label column holds; unset: inferred from the file (infer_label_kind).
  std::optional<LabelKind> label_kind;
  // Classification label list in class-id order (e.g. the train file's label_names); a label
  // outside it is an error naming FILE:LINE. Unset: collected from this file.
  std::optional<std::vector<std::string>> label_names;
  bool integer_ids = false;  // see LabelScheme::integer_ids
};

// Errors as read_columns, plus: no data rows, unknown labels, non-numeric regression labels,
// fewer than two classes when collecting the label list of a single-label file.
LoadedExamples load_custom_file(const std::string& path, const ColumnSpec& columns,
                                const CustomFileOptions& options = {});

// The two halves of load_custom_file, for callers that look at the labels before choosing
// how to read them: the file's (text_a, [text_b], [label]) columns, at least one data row...
ColumnTable read_custom_table(const std::string& path, const ColumnSpec& columns,
                              const TableOptions& options);
// ...and its examples.
LoadedExamples examples_from_table(const ColumnTable& table, const ColumnSpec& columns,
                                   const CustomFileOptions& options);

}  // namespace bertfit
