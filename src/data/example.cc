// Conversion of table columns into labelled examples (see example.h).
#include "data/example.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

#include "base/check.h"
#include "base/error.h"

namespace bertfit {
namespace {

std::string_view trim_spaces(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::optional<long long> parse_integer(std::string_view text) {
  long long value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

std::string allowed_list(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += cat(out.empty() ? "" : ", ", "'", n, "'");
  return out;
}

// The class id of one label string under `scheme`, or -1.
int class_id(const LabelScheme& scheme, const std::string& raw) {
  auto it = std::find(scheme.names.begin(), scheme.names.end(), raw);
  if (it != scheme.names.end()) return static_cast<int>(it - scheme.names.begin());
  if (scheme.integer_ids) {
    std::optional<long long> id = parse_integer(raw);
    if (id && *id >= 0 && *id < static_cast<long long>(scheme.names.size()))
      return static_cast<int>(*id);
  }
  return -1;
}

}  // namespace

const char* label_kind_name(LabelKind kind) {
  switch (kind) {
    case LabelKind::kClass:
      return "class";
    case LabelKind::kNumber:
      return "number";
    case LabelKind::kClassList:
      return "list of classes";
  }
  return "?";
}

std::vector<std::string> split_label_list(std::string_view cell) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos <= cell.size()) {
    std::size_t comma = cell.find(',', pos);
    if (comma == std::string_view::npos) comma = cell.size();
    std::string_view item = trim_spaces(cell.substr(pos, comma - pos));
    if (!item.empty()) out.emplace_back(item);
    pos = comma + 1;
  }
  return out;
}

LabelKind infer_label_kind(const ColumnTable& table, std::size_t column) {
  CHECK(column < table.columns.size(), "label column ", column, " out of range");
  if (column < table.list_column.size() && table.list_column[column]) return LabelKind::kClassList;
  bool all_numbers = !table.rows.empty(), some_fraction = false;
  for (const auto& row : table.rows) {
    std::optional<float> value = parse_float_label(row[column]);
    if (!value) {
      all_numbers = false;
      break;
    }
    some_fraction = some_fraction || !parse_integer(trim_spaces(row[column])).has_value();
  }
  return all_numbers && some_fraction ? LabelKind::kNumber : LabelKind::kClass;
}

std::optional<float> parse_float_label(std::string_view text) {
  text = trim_spaces(text);
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  float value = 0.0f;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  if (!std::isfinite(value)) return std::nullopt;
  return value;
}

std::vector<Example> examples_from_columns(const ColumnTable& table, bool has_text_b,
                                           bool has_label, const LabelScheme& scheme) {
  const std::size_t expected = 1 + (has_text_b ? 1 : 0) + (has_label ? 1 : 0);
  CHECK(table.columns.size() == expected, "table has ", table.columns.size(), " columns, expected ",
        expected);
  CHECK(!has_label || scheme.kind == LabelKind::kNumber || !scheme.names.empty(),
        "empty label list");
  const std::size_t label_col = expected - 1;
  std::vector<Example> out;
  out.reserve(table.rows.size());
  for (std::size_t r = 0; r < table.rows.size(); ++r) {
    const auto& row = table.rows[r];
    Example ex;
    ex.line = table.lines[r];
    ex.text_a = row[0];
    if (has_text_b) ex.text_b = row[1];
    if (has_label) {
      const std::string& raw = row[label_col];
      const std::string where = cat(table.path, ":", ex.line, ": ");
      if (scheme.kind == LabelKind::kNumber) {
        std::optional<float> value = parse_float_label(raw);
        if (!value) {
          throw_error(where, "regression label '", raw, "' in column '", table.columns[label_col],
                      "' is not a finite number");
        }
        ex.label = *value;
      } else if (scheme.kind == LabelKind::kClassList) {
        for (const std::string& item : split_label_list(raw)) {
          const int id = class_id(scheme, item);
          if (id < 0) {
            throw_error(where, "label '", item, "' in column '", table.columns[label_col],
                        "' is not one of the model's labels ", allowed_list(scheme.names));
          }
          ex.label_ids.push_back(id);
        }
        std::sort(ex.label_ids.begin(), ex.label_ids.end());
        ex.label_ids.erase(std::unique(ex.label_ids.begin(), ex.label_ids.end()),
                           ex.label_ids.end());
      } else {
        const int id = class_id(scheme, raw);
        if (id < 0) {
          throw_error(where, "label '", raw, "' in column '", table.columns[label_col],
                      "' is not one of the allowed labels ", allowed_list(scheme.names),
                      scheme.integer_ids ? cat(" (or a class id 0..", scheme.names.size() - 1, ")")
                                         : std::string());
        }
        ex.label = static_cast<float>(id);
      }
      ex.has_label = true;
    }
    out.push_back(std::move(ex));
  }
  return out;
}

std::vector<std::string> collect_label_names(const ColumnTable& table, std::size_t column,
                                             LabelKind kind) {
  CHECK(column < table.columns.size(), "label column ", column, " out of range");
  std::set<std::string> distinct;
  for (const auto& row : table.rows) {
    if (kind == LabelKind::kClassList) {
      for (std::string& item : split_label_list(row[column])) distinct.insert(std::move(item));
    } else {
      distinct.insert(row[column]);
    }
  }
  std::vector<std::string> names(distinct.begin(), distinct.end());  // bytewise order
  bool all_integers = std::all_of(names.begin(), names.end(), [](const std::string& s) {
    return parse_integer(s).has_value();
  });
  if (all_integers) {
    std::stable_sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
      return *parse_integer(a) < *parse_integer(b);
    });
  }
  return names;
}

}  // namespace bertfit
