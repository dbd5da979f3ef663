// Loading generic TSV/CSV/JSONL data files into examples (see custom.h).
#include "data/custom.h"

#include "base/error.h"

namespace bertfit {

LoadedExamples load_custom_file(const std::string& path, const ColumnSpec& columns,
                                const CustomFileOptions& options) {
  std::vector<std::string> specs = {columns.text_a};
  if (columns.text_b) specs.push_back(*columns.text_b);
  if (columns.label) specs.push_back(*columns.label);
  ColumnTable table = read_columns(path, specs, options.table);
  require_rows(table);

  LoadedExamples out;
  out.path = path;
  out.skipped_rows = table.skipped_rows;
  LabelScheme scheme;
  scheme.regression = options.regression;
  if (columns.label && !options.regression) {
    if (options.label_names) {
      if (options.label_names->empty()) throw_error("empty label list given for ", path);
      scheme.names = *options.label_names;
    } else {
      scheme.names = collect_label_names(table, specs.size() - 1);
      if (scheme.names.size() < 2) {
        throw_error(path, ": the label column '", *columns.label, "' holds a single value '",
                    scheme.names.front(),
                    "'; classification needs at least two classes (or give the label list)");
      }
    }
    out.label_names = scheme.names;
  }
  out.examples =
      examples_from_columns(table, columns.text_b.has_value(), columns.label.has_value(), scheme);
  return out;
}

}  // namespace bertfit
