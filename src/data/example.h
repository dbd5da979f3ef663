// Examples: one (text_a, text_b?, label) row of a classification or regression data set, and the
// conversion of selected table columns into examples with label checking shared by the GLUE
// and custom-file loaders.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/table.h"

namespace bertfit {

struct Example {
  std::string text_a;
  std::optional<std::string> text_b;
  float label = 0.0f;                   // class index for classification, the value for regression
  std::vector<std::int32_t> label_ids;  // multi-label: the class ids present (sorted, distinct)
  bool has_label = false;
  std::int64_t line = 0;  // 1-based line in the source file (for messages)
};

// What a label cell holds: one class name, a number (regression), or a list of class names
// separated by commas (multi-label; empty: no label applies).
enum class LabelKind { kClass, kNumber, kClassList };
const char* label_kind_name(LabelKind kind);  // "class", "number", "list of classes"

// How label strings become Example::label / label_ids: the position in `names`
// (classification), the parsed float (regression).
struct LabelScheme {
  LabelKind kind = LabelKind::kClass;
  std::vector<std::string> names;  // classification: label strings in class-id order
  // A label that is not one of `names` but an integer "i" in [0, K) means names[i] (a model
  // whose labels carry transformers' default names LABEL_0 .. LABEL_{K-1}).
  bool integer_ids = false;
};

struct LoadedExamples {
  std::string path;
  std::vector<Example> examples;
  std::vector<std::string> label_names;  // classification: the label list used (class-id order)
  std::int64_t skipped_rows = 0;         // malformed rows skipped (skip_malformed)
  LabelKind label_kind = LabelKind::kClass;
};

// Builds examples from a ColumnTable whose columns are (text_a, [text_b], [label]) in that
// order. Errors name FILE:LINE: a label not in scheme.names (lists the allowed ones), or a
// regression label that is not a finite number.
std::vector<Example> examples_from_columns(const ColumnTable& table, bool has_text_b,
                                           bool has_label, const LabelScheme& scheme);

// The sorted distinct label strings of the label column `column` of a table (with kClassList,
// of the cells' items): numerically when every label is an integer (as HF datasets, which load
// such a column as int), else bytewise.
std::vector<std::string> collect_label_names(const ColumnTable& table, std::size_t column,
                                             LabelKind kind = LabelKind::kClass);

// The items of a multi-label cell: split on ',', spaces around items trimmed, empty items
// dropped ("" -> none).
std::vector<std::string> split_label_list(std::string_view cell);

// What a label column holds when nothing says so, as run_glue decides: JSON lists -> kClassList;
// every cell a number and one of them not an integer -> kNumber (float labels are regression);
// else kClass.
LabelKind infer_label_kind(const ColumnTable& table, std::size_t column);

// Parses a regression target: a finite decimal number (surrounding spaces allowed).
std::optional<float> parse_float_label(std::string_view text);

}  // namespace bertfit
