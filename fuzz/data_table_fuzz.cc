// libFuzzer target: arbitrary bytes as a TSV, CSV or JSONL data file through parse_columns, with
// and without a header and skip_malformed. Checks the invariants predict relies on to print one
// line per data row: every kept row has the requested columns and valid UTF-8, kept and skipped
// rows together number the data rows 0, 1, 2, ... in file order, lines increase, and without
// skip_malformed the result is either the same rows or an Error naming the file.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "data/table.h"

namespace {

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "data_table_fuzz: %s\n", what);
  std::abort();
}

bool valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const int n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
    if (i + n > s.size()) return false;
    i += n;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint8_t mode = data[0];
  const std::string_view content(reinterpret_cast<const char*>(data + 1), size - 1);
  const char* paths[] = {"f.tsv", "f.csv", "f.jsonl"};
  const std::string path = paths[mode % 3];
  bertfit::TableOptions options;
  options.header = (mode & 4) != 0 && mode % 3 != 2;
  const std::vector<std::string> columns = mode % 3 == 2    ? std::vector<std::string>{"a", "b"}
                                           : options.header ? std::vector<std::string>{"x", "1"}
                                                            : std::vector<std::string>{"0", "2"};
  options.skip_malformed = true;
  bertfit::ColumnTable skipped;
  try {
    skipped = bertfit::parse_columns(content, path, columns, options);
  } catch (const bertfit::Error&) {
    return 0;  // header-level problems (an unknown column name) are errors even when skipping
  }
  const std::size_t kept = skipped.rows.size();
  if (skipped.row_numbers.size() != kept || skipped.lines.size() != kept) fail("sizes differ");
  if (static_cast<std::int64_t>(skipped.skipped.size()) != skipped.skipped_rows)
    fail("skipped count");
  std::vector<bool> seen(kept + skipped.skipped.size(), false);
  for (std::size_t i = 0; i < kept; ++i) {
    if (skipped.rows[i].size() != columns.size()) fail("row width");
    for (const auto& field : skipped.rows[i])
      if (!valid_utf8(field)) fail("invalid UTF-8 kept");
    const auto r = static_cast<std::size_t>(skipped.row_numbers[i]);
    if (r >= seen.size() || seen[r]) fail("row number");
    seen[r] = true;
    if (i > 0 && (skipped.row_numbers[i] <= skipped.row_numbers[i - 1] ||
                  skipped.lines[i] <= skipped.lines[i - 1]))
      fail("order");
  }
  for (const auto& s : skipped.skipped) {
    const auto r = static_cast<std::size_t>(s.row);
    if (r >= seen.size() || seen[r]) fail("skipped row number");
    seen[r] = true;
  }
  options.skip_malformed = false;
  try {
    bertfit::ColumnTable strict = bertfit::parse_columns(content, path, columns, options);
    if (!skipped.skipped.empty()) fail("a malformed row was accepted without skip_malformed");
    if (strict.rows != skipped.rows) fail("strict rows differ");
  } catch (const bertfit::Error& e) {
    if (skipped.skipped.empty()) fail("an error without a malformed row");
    if (std::string(e.what()).rfind(path + ":", 0) != 0) fail("error does not name the file");
  }
  return 0;
}
