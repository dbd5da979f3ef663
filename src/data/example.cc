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

}  // namespace

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
  CHECK(!has_label || scheme.regression || !scheme.names.empty(), "empty label list");
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
      if (scheme.regression) {
        std::optional<float> value = parse_float_label(raw);
        if (!value) {
          throw_error(table.path, ":", ex.line, ": regression label '", raw, "' in column '",
                      table.columns[label_col], "' is not a finite number");
        }
        ex.label = *value;
      } else {
        auto it = std::find(scheme.names.begin(), scheme.names.end(), raw);
        if (it == scheme.names.end()) {
          throw_error(table.path, ":", ex.line, ": label '", raw, "' in column '",
                      table.columns[label_col], "' is not one of the allowed labels ",
                      allowed_list(scheme.names));
        }
        ex.label = static_cast<float>(it - scheme.names.begin());
      }
      ex.has_label = true;
    }
    out.push_back(std::move(ex));
  }
  return out;
}

std::vector<std::string> collect_label_names(const ColumnTable& table, std::size_t column) {
  CHECK(column < table.columns.size(), "label column ", column, " out of range");
  std::set<std::string> distinct;
  for (const auto& row : table.rows) distinct.insert(row[column]);
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
