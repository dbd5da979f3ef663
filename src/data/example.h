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
  float label = 0.0f;  // class index for classification, the value for regression
  bool has_label = false;
  std::int64_t line = 0;  // 1-based line in the source file (for messages)
};

// How label strings become Example::label: the position in `names` (classification) or the
// parsed float (regression).
struct LabelScheme {
  bool regression = false;
  std::vector<std::string> names;  // classification: label strings in class-id order
};

struct LoadedExamples {
  std::string path;
  std::vector<Example> examples;
  std::vector<std::string> label_names;  // classification: the label list used (class-id order)
  std::int64_t skipped_rows = 0;         // malformed rows skipped (skip_malformed)
};

// Builds examples from a ColumnTable whose columns are (text_a, [text_b], [label]) in that
// order. Errors name FILE:LINE: a label not in scheme.names (lists the allowed ones), or a
// regression label that is not a finite number.
std::vector<Example> examples_from_columns(const ColumnTable& table, bool has_text_b,
                                           bool has_label, const LabelScheme& scheme);

// The sorted distinct label strings of the label column `column` of a table: numerically when
// every label is an integer (as HF datasets, which load such a column as int), else bytewise.
std::vector<std::string> collect_label_names(const ColumnTable& table, std::size_t column);

// Parses a regression target: a finite decimal number (surrounding spaces allowed).
std::optional<float> parse_float_label(std::string_view text);

}  // namespace bertfit
