// Reading delimited data files (TSV, CSV, JSONL) into rows of string fields, restricted to the
// columns a caller asks for. Every malformed row is reported as "FILE:LINE: ..." (1-based line
// where the row starts) or, with skip_malformed, skipped and counted.
//
// Formats:
//   TSV   split on TAB only, no quote processing (GLUE text is full of '"'; HF uses QUOTE_NONE).
//   CSV   RFC 4180: fields may be quoted; "" inside quotes is one '"'; quoted fields may hold
//         commas and newlines. A '"' inside an unquoted field is kept literally (as Python's csv).
//   JSONL one JSON object per line; a column is a key; string, number and boolean values are
//         converted to text (numbers as nlohmann::json prints them, e.g. 1, 2.5).
//         A list of strings or numbers (e.g. multi-label "labels": ["toxic", "insult"]) is
//         joined with ", " (an item holding a comma is malformed).
// All formats: a UTF-8 BOM is stripped, CRLF line ends are accepted, a missing final newline is
// fine and blank lines (anywhere) are skipped. The header flag applies to TSV and CSV only.
// Malformed rows: a selected field that is not valid UTF-8; with a header, a row with more
// fields than the header names (a stray delimiter would shift every later column).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bertfit {

// kConll names CoNLL files (data/tagged.h), which hold tagged words, not table rows: the table
// readers refuse it.
enum class TableFormat { kTsv, kCsv, kJsonl, kConll };

// .tsv/.txt -> TSV, .csv -> CSV, .jsonl/.json -> JSONL; Error naming the path otherwise.
TableFormat table_format_for_path(const std::string& path);
// How messages name standard input, which read_columns reads for the path "-".
inline constexpr const char* kStdinName = "<stdin>";
const char* table_format_name(TableFormat format);  // "tsv", "csv", "jsonl"

// A column spec that is all digits is a 0-based index; anything else is a header name (or a
// JSONL key; JSONL specs are always keys).
bool is_index_column(std::string_view spec);

struct TableOptions {
  std::optional<TableFormat> format;  // unset: from the file extension
  bool header = true;                 // TSV/CSV: the first non-blank line names the columns
  bool skip_malformed = false;        // skip (and count) malformed rows instead of failing
};

// One record of a TSV/CSV file before column selection. error is non-empty for a malformed
// record (unterminated quote, garbage after a closing quote); fields are then unusable.
struct TableRecord {
  std::int64_t line = 0;  // 1-based line where the record starts
  std::vector<std::string> fields;
  std::string error;
};

// Splits TSV or CSV text (BOM already stripped or not) into records, skipping blank lines.
std::vector<TableRecord> split_records(std::string_view content, TableFormat format);

// A data row left out with skip_malformed, and why.
struct SkippedRow {
  std::int64_t row = 0;   // 0-based index among the file's data rows (as ColumnTable::row_numbers)
  std::int64_t line = 0;  // 1-based line where it starts
  std::string reason;
};

// Rows restricted to the requested columns, in request order: rows[i][k] is column k of row i.
struct ColumnTable {
  std::string path;
  std::vector<std::string> columns;  // the specs as requested
  std::vector<std::string> header;   // header names (TSV/CSV with header), else empty
  std::int64_t header_line = 0;      // 1-based line of the header, 0 if none was read
  std::vector<std::vector<std::string>> rows;
  std::vector<std::int64_t> lines;        // 1-based line where rows[i] starts
  std::vector<std::int64_t> row_numbers;  // 0-based index of rows[i] among all data rows,
                                          // skipped ones included
  std::int64_t skipped_rows = 0;          // malformed rows skipped (skip_malformed)
  std::vector<SkippedRow> skipped;        // the same rows, in file order
  // JSONL: column k held a JSON list on some row (its items are then joined with ", ").
  std::vector<bool> list_column;
};

// Reads path ("-": standard input, which needs options.format) and selects columns. Errors
// (bertfit::Error): missing/unreadable file, unknown extension, unknown column name (lists the
// header), a name given for a file without header, and, without skip_malformed, the first malformed
// row as "FILE:LINE: ...". An empty file or a file with only a header yields no rows: call
// require_rows() where rows are needed.
ColumnTable read_columns(const std::string& path, const std::vector<std::string>& columns,
                         const TableOptions& options = {});
// The same on in-memory content; path is used for the format (unless given) and in messages.
ColumnTable parse_columns(std::string_view content, const std::string& path,
                          const std::vector<std::string>& columns,
                          const TableOptions& options = {});

// Logs a warning when a TSV/CSV file's first line was taken as a header although every column
// is given by index (the header then names nothing; the line may be data: --no-header).
void warn_if_index_columns_with_header(const ColumnTable& table);

// Throws an Error naming the file when it has no data rows, saying whether it was empty, held
// only a header, or had every row skipped as malformed.
void require_rows(const ColumnTable& table);

// content without a leading UTF-8 byte-order mark.
inline std::string_view strip_bom(std::string_view s) {
  constexpr std::string_view kBom = "\xEF\xBB\xBF";
  if (s.substr(0, kBom.size()) == kBom) s.remove_prefix(kBom.size());
  return s;
}

// Calls fn(line_number, line) for every physical line of content (1-based numbers) with its
// '\n' and a trailing '\r' removed (the table and CoNLL readers' line loop).
template <class Fn>
void for_each_line(std::string_view content, Fn&& fn) {
  std::int64_t line = 0;
  std::size_t pos = 0;
  while (pos < content.size()) {
    std::size_t end = content.find('\n', pos);
    if (end == std::string_view::npos) end = content.size();
    std::string_view text = content.substr(pos, end - pos);
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    fn(++line, text);
    pos = end + 1;
  }
}

}  // namespace bertfit
