// Loading generic TSV/CSV/JSONL data files into examples (see custom.h).
#include "data/custom.h"

#include "base/error.h"

namespace bertfit {

ColumnTable read_custom_table(const std::string& path, const ColumnSpec& columns,
                              const TableOptions& options) {
  std::vector<std::string> specs = {columns.text_a};
  if (columns.text_b) specs.push_back(*columns.text_b);
  if (columns.label) specs.push_back(*columns.label);
  ColumnTable table = read_columns(path, specs, options);
  warn_if_index_columns_with_header(table);
  require_rows(table);
  return table;
}

LoadedExamples load_custom_file(const std::string& path, const ColumnSpec& columns,
                                const CustomFileOptions& options) {
  return examples_from_table(read_custom_table(path, columns, options.table), columns, options);
}

LoadedExamples examples_from_table(const ColumnTable& table, const ColumnSpec& columns,
                                   const CustomFileOptions& options) {
  const std::string& path = table.path;
  const std::size_t label_column = table.columns.size() - 1;
  LoadedExamples out;
  out.path = path;
  out.skipped_rows = table.skipped_rows;
  LabelScheme scheme;
  if (columns.label) {
    scheme.kind = options.label_kind ? *options.label_kind : infer_label_kind(table, label_column);
  }
  if (columns.label && scheme.kind != LabelKind::kNumber) {
    if (options.label_names) {
      if (options.label_names->empty()) throw_error("empty label list given for ", path);
      scheme.names = *options.label_names;
      scheme.integer_ids = options.integer_ids;
    } else {
      scheme.names = collect_label_names(table, label_column, scheme.kind);
      if (scheme.kind == LabelKind::kClass && scheme.names.size() < 2) {
        throw_error(path, ": the label column '", *columns.label, "' holds a single value '",
                    scheme.names.front(),
                    "'; classification needs at least two classes (name them all with --labels "
                    "NAME,NAME,...)");
      }
      if (scheme.names.empty()) {
        throw_error(path, ": the label column '", *columns.label,
                    "' names no label on any row; multi-label data needs at least one");
      }
    }
    out.label_names = scheme.names;
  }
  out.label_kind = scheme.kind;
  out.examples =
      examples_from_columns(table, columns.text_b.has_value(), columns.label.has_value(), scheme);
  return out;
}

}  // namespace bertfit
