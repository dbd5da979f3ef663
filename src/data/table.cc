// TSV/CSV record splitting, JSONL parsing and column selection (see table.h for the rules).
#include "data/table.h"

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file.h"
#include "base/log.h"

namespace bertfit {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

void split_tsv(std::string_view content, std::vector<TableRecord>& out) {
  for_each_line(content, [&](std::int64_t line, std::string_view text) {
    if (text.empty()) return;
    TableRecord record;
    record.line = line;
    std::size_t pos = 0;
    while (true) {
      std::size_t tab = text.find('\t', pos);
      if (tab == std::string_view::npos) {
        record.fields.emplace_back(text.substr(pos));
        break;
      }
      record.fields.emplace_back(text.substr(pos, tab - pos));
      pos = tab + 1;
    }
    out.push_back(std::move(record));
  });
}

// RFC 4180 state machine. On a malformed record the parser emits it with an error and resumes
// at the physical line after the one where the damage was found (for an unterminated quote:
// after the line where the record started), so skip_malformed loses as little as possible.
class CsvSplitter {
 public:
  explicit CsvSplitter(std::string_view s) : s_(s) {}

  void run(std::vector<TableRecord>& out) {
    while (pos_ < s_.size()) {
      if (at_line_end()) {  // blank line
        consume_line_end();
        continue;
      }
      out.push_back(parse_record());
    }
  }

 private:
  bool at_line_end() const {
    return s_[pos_] == '\n' || (s_[pos_] == '\r' && pos_ + 1 < s_.size() && s_[pos_ + 1] == '\n');
  }
  void consume_line_end() {
    if (s_[pos_] == '\r') ++pos_;
    ++pos_;
    ++line_;
  }
  // Moves to the start of the line after the one containing position p.
  void resume_after_line_of(std::size_t p, std::int64_t line_of_p) {
    std::size_t nl = s_.find('\n', p);
    pos_ = nl == std::string_view::npos ? s_.size() : nl + 1;
    line_ = line_of_p + 1;
  }

  TableRecord parse_record() {
    TableRecord record;
    record.line = line_;
    const std::size_t record_start = pos_;
    while (true) {
      std::string field;
      if (pos_ < s_.size() && s_[pos_] == '"') {
        const std::int64_t quote_line = line_;
        ++pos_;
        while (true) {
          if (pos_ >= s_.size()) {
            record.error = cat("unterminated quoted field ", record.fields.size() + 1,
                               " (the quote opened on line ", quote_line, ")");
            record.fields.clear();
            resume_after_line_of(record_start, record.line);
            return record;
          }
          char c = s_[pos_++];
          if (c == '"') {
            if (pos_ < s_.size() && s_[pos_] == '"') {
              field.push_back('"');
              ++pos_;
            } else {
              break;
            }
          } else {
            if (c == '\n') ++line_;
            field.push_back(c);
          }
        }
        if (pos_ < s_.size() && s_[pos_] != ',' && !at_line_end()) {
          record.error = cat("unexpected character '", s_[pos_],
                             "' after the closing quote of field ", record.fields.size() + 1);
          record.fields.clear();
          resume_after_line_of(pos_, line_);
          return record;
        }
      } else {
        while (pos_ < s_.size() && s_[pos_] != ',' && !at_line_end()) field.push_back(s_[pos_++]);
      }
      record.fields.push_back(std::move(field));
      if (pos_ >= s_.size()) return record;
      if (s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      consume_line_end();
      return record;
    }
  }

  std::string_view s_;
  std::size_t pos_ = 0;
  std::int64_t line_ = 1;
};

std::string quoted_list(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += cat(out.empty() ? "" : ", ", "'", n, "'");
  return out.empty() ? "(none)" : out;
}

// Marks a malformed data row: throws "FILE:LINE: message" or records it as skipped.
void malformed(ColumnTable& table, const TableOptions& options, std::int64_t line,
               const std::string& message) {
  if (!options.skip_malformed) throw_error(table.path, ":", line, ": ", message);
  const std::int64_t row =
      static_cast<std::int64_t>(table.rows.size()) + table.skipped_rows;  // data rows so far
  table.skipped.push_back({row, line, message});
  ++table.skipped_rows;
}

void add_row(ColumnTable& table, std::vector<std::string> row, std::int64_t line) {
  table.row_numbers.push_back(static_cast<std::int64_t>(table.rows.size()) + table.skipped_rows);
  table.rows.push_back(std::move(row));
  table.lines.push_back(line);
}

// Byte offset of the first invalid UTF-8 sequence in s (overlong forms, surrogates and code
// points above U+10FFFF included), or npos.
std::size_t invalid_utf8_at(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    int extra = 0;
    std::uint32_t cp = 0, min = 0;
    if ((c & 0xE0) == 0xC0) {
      extra = 1, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3, cp = c & 0x07, min = 0x10000;
    } else {
      return i;
    }
    if (i + extra >= s.size()) return i;  // truncated sequence
    for (int k = 1; k <= extra; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += extra + 1;
  }
  return std::string_view::npos;
}

// The message for a row whose selected fields are not all valid UTF-8, or "".
std::string utf8_problem(const ColumnTable& table, const std::vector<std::string>& row) {
  for (std::size_t k = 0; k < row.size(); ++k) {
    const std::size_t at = invalid_utf8_at(row[k]);
    if (at != std::string_view::npos) {
      return cat("column '", table.columns[k], "' is not valid UTF-8 (byte ", at + 1,
                 " of the field); re-encode the file as UTF-8");
    }
  }
  return "";
}

// Resolves each spec to a field index (header name or 0-based index).
std::vector<std::size_t> resolve_columns(const ColumnTable& table, bool has_header) {
  std::vector<std::size_t> index;
  for (const auto& spec : table.columns) {
    if (is_index_column(spec)) {
      index.push_back(std::stoull(spec));
      continue;
    }
    if (!has_header) {
      throw_error("column '", spec, "' is given by name but ", table.path,
                  " is read without a header line; give a 0-based column index instead");
    }
    std::size_t i = 0;
    while (i < table.header.size() && table.header[i] != spec) ++i;
    if (i == table.header.size()) {
      throw_error("column '", spec, "' not found in the header of ", table.path,
                  "; available columns: ", quoted_list(table.header));
    }
    index.push_back(i);
  }
  return index;
}

void select_delimited(std::string_view content, const TableOptions& options, TableFormat format,
                      ColumnTable& table) {
  std::vector<TableRecord> records = split_records(content, format);
  std::size_t first = 0;
  if (options.header && !records.empty()) {
    if (!records[0].error.empty()) {
      throw_error(table.path, ":", records[0].line, ": malformed header line: ", records[0].error);
    }
    table.header = std::move(records[0].fields);
    table.header_line = records[0].line;
    first = 1;
  }
  if (first == records.size()) return;  // nothing to select; require_rows() explains
  std::vector<std::size_t> index = resolve_columns(table, options.header);
  for (std::size_t r = first; r < records.size(); ++r) {
    TableRecord& rec = records[r];
    if (!rec.error.empty()) {
      malformed(table, options, rec.line, rec.error);
      continue;
    }
    if (options.header && rec.fields.size() > table.header.size()) {
      malformed(
          table, options, rec.line,
          cat("row has ", rec.fields.size(), " fields but the header names ", table.header.size(),
              format == TableFormat::kCsv
                  ? " (quote fields that hold a comma)"
                  : " (a TAB inside a field splits it; TSV is split on TAB only)"));
      continue;
    }
    std::size_t k = 0;
    while (k < index.size() && index[k] < rec.fields.size()) ++k;
    if (k < index.size()) {
      malformed(table, options, rec.line,
                cat("row has ", rec.fields.size(), " field(s) but column '", table.columns[k],
                    "' needs at least ", index[k] + 1,
                    format == TableFormat::kTsv ? " (TSV is split on TAB only)" : ""));
      continue;
    }
    std::vector<std::string> row;
    row.reserve(index.size());
    for (std::size_t i : index) row.push_back(std::move(rec.fields[i]));
    if (std::string problem = utf8_problem(table, row); !problem.empty()) {
      malformed(table, options, rec.line, problem);
      continue;
    }
    add_row(table, std::move(row), rec.line);
  }
}

// A JSON list of strings or numbers as "a, b, c"; "" with `error` set otherwise.
std::string join_list(const nlohmann::json& list, std::string& error) {
  std::string out;
  for (const auto& item : list) {
    std::string text;
    if (item.is_string()) {
      text = item.get<std::string>();
    } else if (item.is_number()) {
      text = item.dump();
    } else {
      error = cat("a list item is a JSON ", item.type_name(), "; expected strings or numbers");
      return "";
    }
    if (text.find(',') != std::string::npos) {
      error = cat("list item '", text, "' holds a comma, which separates list items");
      return "";
    }
    out += cat(out.empty() ? "" : ", ", text);
  }
  return out;
}

std::string json_keys(const nlohmann::json& object) {
  std::vector<std::string> keys;
  for (auto it = object.begin(); it != object.end(); ++it) keys.push_back(it.key());
  return quoted_list(keys);
}

void select_jsonl(std::string_view content, const TableOptions& options, ColumnTable& table) {
  for_each_line(content, [&](std::int64_t line, std::string_view text) {
    if (text.find_first_not_of(" \t") == std::string_view::npos) return;
    if (const std::size_t at = invalid_utf8_at(text); at != std::string_view::npos) {
      return malformed(table, options, line,
                       cat("not valid UTF-8 (byte ", at + 1,
                           " of the line); re-encode the file "
                           "as UTF-8"));
    }
    nlohmann::json object = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (object.is_discarded()) return malformed(table, options, line, "invalid JSON");
    if (!object.is_object()) {
      return malformed(table, options, line,
                       cat("expected a JSON object, got ", object.type_name()));
    }
    std::vector<std::string> row;
    for (std::size_t k = 0; k < table.columns.size(); ++k) {
      const std::string& key = table.columns[k];
      auto it = object.find(key);
      if (it == object.end()) {
        return malformed(table, options, line,
                         cat("no key '", key, "' (keys on this line: ", json_keys(object), ")"));
      }
      if (it->is_string()) {
        row.push_back(it->get<std::string>());
      } else if (it->is_number() || it->is_boolean()) {
        row.push_back(it->dump());
      } else if (it->is_array()) {
        std::string error;
        row.push_back(join_list(*it, error));
        if (!error.empty()) return malformed(table, options, line, cat("key '", key, "': ", error));
        table.list_column[k] = true;
      } else {
        return malformed(table, options, line,
                         cat("key '", key, "' holds a JSON ", it->type_name(),
                             "; expected a string, a number or a list"));
      }
    }
    add_row(table, std::move(row), line);
  });
}

}  // namespace

TableFormat table_format_for_path(const std::string& path) {
  if (ends_with(path, ".tsv") || ends_with(path, ".txt")) return TableFormat::kTsv;
  if (ends_with(path, ".csv")) return TableFormat::kCsv;
  if (ends_with(path, ".jsonl") || ends_with(path, ".json")) return TableFormat::kJsonl;
  if (ends_with(path, ".conll")) return TableFormat::kConll;
  throw_error("cannot tell the format of ", path,
              " from its extension (expected .tsv, .txt, .csv, .jsonl or .json); give the "
              "format explicitly (tsv, csv or jsonl)");
}

const char* table_format_name(TableFormat format) {
  switch (format) {
    case TableFormat::kTsv:
      return "tsv";
    case TableFormat::kCsv:
      return "csv";
    case TableFormat::kJsonl:
      return "jsonl";
    case TableFormat::kConll:
      return "conll";
  }
  return "?";
}

bool is_index_column(std::string_view spec) {
  if (spec.empty() || spec.size() > 9) return false;
  for (char c : spec) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

std::vector<TableRecord> split_records(std::string_view content, TableFormat format) {
  content = strip_bom(content);
  std::vector<TableRecord> out;
  if (format == TableFormat::kCsv) {
    CsvSplitter(content).run(out);
  } else {
    split_tsv(content, out);
  }
  return out;
}

ColumnTable parse_columns(std::string_view content, const std::string& path,
                          const std::vector<std::string>& columns, const TableOptions& options) {
  ColumnTable table;
  table.path = path;
  table.columns = columns;
  TableFormat format = options.format ? *options.format : table_format_for_path(path);
  if (format == TableFormat::kConll) {
    throw_error(path, ": a CoNLL file holds tagged words (token classification), not rows of ",
                "columns; it trains and evaluates a token classifier");
  }
  content = strip_bom(content);
  table.list_column.assign(columns.size(), false);
  if (format == TableFormat::kJsonl) {
    select_jsonl(content, options, table);
  } else {
    select_delimited(content, options, format, table);
  }
  return table;
}

ColumnTable read_columns(const std::string& path, const std::vector<std::string>& columns,
                         const TableOptions& options) {
  if (path == "-") {  // standard input: no extension to tell the format
    if (!options.format) {
      throw_error("reading standard input ('-') needs its format: give --format tsv, csv or jsonl");
    }
    return parse_columns(read_stdin(), kStdinName, columns, options);
  }
  TableFormat format = options.format ? *options.format : table_format_for_path(path);
  TableOptions resolved = options;
  resolved.format = format;
  return parse_columns(read_file(path), path, columns, resolved);
}

void warn_if_index_columns_with_header(const ColumnTable& table) {
  if (table.header_line == 0) return;
  for (const auto& spec : table.columns)
    if (!is_index_column(spec)) return;
  log_warn(table.path, ":", table.header_line,
           ": read as a header line, not as data (columns are given by index); pass --no-header "
           "if it is data");
}

void require_rows(const ColumnTable& table) {
  if (!table.rows.empty()) return;
  if (table.skipped_rows > 0) {
    throw_error(table.path, " has no usable rows: all ", table.skipped_rows,
                " data row(s) were malformed and skipped");
  }
  if (table.header_line > 0) {
    throw_error(table.path, " has a header line but no data rows");
  }
  throw_error(table.path, " is empty (no data rows)");
}

}  // namespace bertfit
