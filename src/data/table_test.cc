// Tests of the TSV/CSV/JSONL readers: BOM, CRLF, missing final newline, blank lines, CSV
// quoting, JSONL values, header names and indices, unknown columns, malformed rows with their
// line numbers, skip counts, empty files and format detection.
#include "data/table.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "tests/util/errors.h"

namespace bertfit {
namespace {

using Rows = std::vector<std::vector<std::string>>;

TableOptions opts(TableFormat format, bool header = true, bool skip = false) {
  TableOptions o;
  o.format = format;
  o.header = header;
  o.skip_malformed = skip;
  return o;
}

// Returns the message of the Error thrown by fn, or "" if none was thrown.
using testing::error_of;

TEST(Table, FormatFromExtension) {
  EXPECT_EQ(table_format_for_path("a/b.tsv"), TableFormat::kTsv);
  EXPECT_EQ(table_format_for_path("x.txt"), TableFormat::kTsv);
  EXPECT_EQ(table_format_for_path("x.csv"), TableFormat::kCsv);
  EXPECT_EQ(table_format_for_path("x.jsonl"), TableFormat::kJsonl);
  EXPECT_EQ(table_format_for_path("x.json"), TableFormat::kJsonl);
  EXPECT_NE(error_of([] { table_format_for_path("x.parquet"); }).find("x.parquet"),
            std::string::npos);
  EXPECT_TRUE(is_index_column("0"));
  EXPECT_TRUE(is_index_column("12"));
  EXPECT_FALSE(is_index_column("#1 ID"));
  EXPECT_FALSE(is_index_column(""));
}

TEST(Table, TsvBomCrlfNoFinalNewlineAndBlankLines) {
  std::string content = "\xEF\xBB\xBFname\ttext\r\nx\t\"quoted, not special\r\n\r\ny\tlast\n\n\n";
  auto t = parse_columns(content, "f.tsv", {"text", "name"}, opts(TableFormat::kTsv));
  EXPECT_EQ(t.header, (std::vector<std::string>{"name", "text"}));  // BOM stripped
  EXPECT_EQ(t.header_line, 1);
  EXPECT_EQ(t.rows, (Rows{{"\"quoted, not special", "x"}, {"last", "y"}}));
  EXPECT_EQ(t.lines, (std::vector<std::int64_t>{2, 4}));
  auto u = parse_columns("a\tb\nc\td", "f.tsv", {"1"}, opts(TableFormat::kTsv, false));
  EXPECT_EQ(u.rows, (Rows{{"b"}, {"d"}}));  // no final newline: last row kept
}

TEST(Table, TsvKeepsEmptyFields) {
  // CoLA-style rows: the third field is empty; consecutive tabs must not collapse.
  auto t = parse_columns("gj04\t1\t\tA sentence.\ngj04\t0\t*\tB.\n", "c.tsv", {"3", "1"},
                         opts(TableFormat::kTsv, false));
  EXPECT_EQ(t.rows, (Rows{{"A sentence.", "1"}, {"B.", "0"}}));
  auto records = split_records("a\t\t\tb\n", TableFormat::kTsv);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].fields, (std::vector<std::string>{"a", "", "", "b"}));
}

TEST(Table, CsvQuoting) {
  std::string content =
      "a,b,c\r\n"
      "1,\"x, with comma\",\"say \"\"hi\"\"\"\r\n"
      "2,\"two\nlines\",plain\"quote\n"
      "3,,\"\"\n";
  auto t = parse_columns(content, "f.csv", {"a", "b", "c"}, opts(TableFormat::kCsv));
  EXPECT_EQ(t.rows, (Rows{{"1", "x, with comma", "say \"hi\""},
                          {"2", "two\nlines", "plain\"quote"},
                          {"3", "", ""}}));
  EXPECT_EQ(t.lines, (std::vector<std::int64_t>{2, 3, 5}));
}

TEST(Table, CsvMalformedRowsAndRecovery) {
  std::string garbage = "a,b\n1,\"x\"y\n2,ok\n";
  std::string msg =
      error_of([&] { parse_columns(garbage, "g.csv", {"b"}, opts(TableFormat::kCsv)); });
  EXPECT_NE(msg.find("g.csv:2: unexpected character 'y'"), std::string::npos) << msg;
  auto t = parse_columns(garbage, "g.csv", {"b"}, opts(TableFormat::kCsv, true, true));
  EXPECT_EQ(t.rows, (Rows{{"ok"}}));
  EXPECT_EQ(t.lines, (std::vector<std::int64_t>{3}));
  EXPECT_EQ(t.skipped_rows, 1);

  // An unterminated quote: the record at line 3 is malformed; parsing resumes on line 4.
  std::string open = "a,b\n1,fine\n2,\"never closed\n3,next\n4,last";
  msg = error_of([&] { parse_columns(open, "u.csv", {"a", "b"}, opts(TableFormat::kCsv)); });
  EXPECT_NE(msg.find("u.csv:3: unterminated quoted field 2"), std::string::npos) << msg;
  t = parse_columns(open, "u.csv", {"a", "b"}, opts(TableFormat::kCsv, true, true));
  EXPECT_EQ(t.rows, (Rows{{"1", "fine"}, {"3", "next"}, {"4", "last"}}));
  EXPECT_EQ(t.lines, (std::vector<std::int64_t>{2, 4, 5}));
  EXPECT_EQ(t.skipped_rows, 1);
}

TEST(Table, JsonlValues) {
  std::string content =
      "\xEF\xBB\xBF{\"text\": \"caf\\u00e9\", \"label\": 1, \"score\": 2.5}\r\n"
      "\n"
      "{\"text\": \"b\", \"label\": \"pos\", \"score\": -1, \"extra\": [1]}\n";
  auto t = parse_columns(content, "d.jsonl", {"text", "label", "score"});
  EXPECT_EQ(t.rows, (Rows{{"caf\xC3\xA9", "1", "2.5"}, {"b", "pos", "-1"}}));
  EXPECT_EQ(t.lines, (std::vector<std::int64_t>{1, 3}));
  EXPECT_EQ(t.header_line, 0);
}

TEST(Table, JsonlMalformedLines) {
  std::string content =
      "{\"text\": \"a\"}\n"
      "{\"text\": \"b\"\n"  // invalid JSON
      "[\"text\"]\n"        // not an object
      "{\"txt\": \"c\"}\n"  // missing key
      "{\"text\": null}\n"  // unsupported value
      "{\"text\": \"d\"}\n";
  std::string msg = error_of([&] { parse_columns(content, "m.jsonl", {"text"}); });
  EXPECT_NE(msg.find("m.jsonl:2: invalid JSON"), std::string::npos) << msg;
  TableOptions skip;
  skip.skip_malformed = true;
  auto t = parse_columns(content, "m.jsonl", {"text"}, skip);
  EXPECT_EQ(t.rows, (Rows{{"a"}, {"d"}}));
  EXPECT_EQ(t.skipped_rows, 4);
  msg = error_of([&] { parse_columns("{\"txt\": \"c\"}\n", "k.jsonl", {"text"}); });
  EXPECT_NE(msg.find("k.jsonl:1: no key 'text' (keys on this line: 'txt')"), std::string::npos)
      << msg;
}

TEST(Table, HeaderNamesAndIndices) {
  std::string content = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t10\t11\tA\tB\n";
  auto t = parse_columns(content, "m.tsv", {"#1 String", "4", "Quality"}, opts(TableFormat::kTsv));
  EXPECT_EQ(t.rows, (Rows{{"A", "B", "1"}}));
  std::string msg =
      error_of([&] { parse_columns(content, "m.tsv", {"sentence"}, opts(TableFormat::kTsv)); });
  EXPECT_NE(msg.find("column 'sentence' not found in the header of m.tsv"), std::string::npos);
  EXPECT_NE(msg.find("'Quality', '#1 ID', '#2 ID', '#1 String', '#2 String'"), std::string::npos)
      << msg;
  msg =
      error_of([&] { parse_columns("a\tb\n", "n.tsv", {"text"}, opts(TableFormat::kTsv, false)); });
  EXPECT_NE(msg.find("n.tsv is read without a header"), std::string::npos) << msg;
}

TEST(Table, TooFewFieldsReportsLineAndSkips) {
  std::string content = "a\tb\tc\n1\t2\t3\n4\t5\n\n6\t7\t8\n9\n";
  std::string msg = error_of([&] {
    parse_columns(content, "s.tsv", {"a", "c"}, opts(TableFormat::kTsv));
  });
  EXPECT_NE(msg.find("s.tsv:3: row has 2 field(s) but column 'c' needs at least 3"),
            std::string::npos)
      << msg;
  auto t = parse_columns(content, "s.tsv", {"a", "c"}, opts(TableFormat::kTsv, true, true));
  EXPECT_EQ(t.rows, (Rows{{"1", "3"}, {"6", "8"}}));
  EXPECT_EQ(t.lines, (std::vector<std::int64_t>{2, 5}));
  EXPECT_EQ(t.skipped_rows, 2);
  // Every data row keeps its index; skipped ones are listed with line and reason.
  EXPECT_EQ(t.row_numbers, (std::vector<std::int64_t>{0, 2}));
  ASSERT_EQ(t.skipped.size(), 2u);
  EXPECT_EQ(t.skipped[0].row, 1);
  EXPECT_EQ(t.skipped[0].line, 3);
  EXPECT_EQ(t.skipped[1].row, 3);
  EXPECT_EQ(t.skipped[1].line, 6);
  EXPECT_NE(t.skipped[1].reason.find("needs at least 3"), std::string::npos);
}

TEST(Table, TooManyFieldsWithAHeaderIsMalformed) {
  std::string msg = error_of([&] {
    parse_columns("t,l\nx,1\ny,z,1\n", "d.csv", {"t", "l"}, opts(TableFormat::kCsv));
  });
  EXPECT_NE(msg.find("d.csv:3: row has 3 fields but the header names 2"), std::string::npos) << msg;
  // Without a header nothing says how many fields a row has (GLUE's QQP subset varies).
  auto t = parse_columns("x\t1\ny\tz\t1\n", "d.tsv", {"0"}, opts(TableFormat::kTsv, false));
  EXPECT_EQ(t.rows.size(), 2u);
}

TEST(Table, InvalidUtf8IsMalformed) {
  // Stray continuation, truncated sequence, overlong '/', UTF-16 surrogate, above U+10FFFF.
  for (std::string bad : {"a\x80", "ab\xc3", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80"}) {
    std::string msg = error_of(
        [&] { parse_columns("t\nok\n" + bad + "\n", "u.tsv", {"t"}, opts(TableFormat::kTsv)); });
    EXPECT_NE(msg.find("u.tsv:3: column 't' is not valid UTF-8"), std::string::npos) << msg;
  }
  // Valid multi-byte text passes: é, €, 😀.
  auto t = parse_columns("t\n\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\n", "u.tsv", {"t"},
                         opts(TableFormat::kTsv));
  EXPECT_EQ(t.rows.size(), 1u);
  std::string msg = error_of([&] {
    parse_columns("{\"t\": \"a\"}\n{\"t\": \"\xff\"}\n", "u.jsonl", {"t"},
                  opts(TableFormat::kJsonl));
  });
  EXPECT_NE(msg.find("u.jsonl:2: not valid UTF-8"), std::string::npos) << msg;
}

TEST(Table, JsonlListsAreJoined) {
  auto t = parse_columns(
      "{\"t\": \"a\", \"l\": [\"x\", \"y\"]}\n{\"t\": \"b\", \"l\": []}\n{\"t\": \"c\", \"l\": "
      "[3]}\n",
      "l.jsonl", {"t", "l"}, opts(TableFormat::kJsonl));
  EXPECT_EQ(t.rows, (Rows{{"a", "x, y"}, {"b", ""}, {"c", "3"}}));
  EXPECT_EQ(t.list_column, (std::vector<bool>{false, true}));
  std::string msg = error_of(
      [&] { parse_columns("{\"l\": [\"x,y\"]}\n", "l.jsonl", {"l"}, opts(TableFormat::kJsonl)); });
  EXPECT_NE(msg.find("l.jsonl:1: key 'l': list item 'x,y' holds a comma"), std::string::npos)
      << msg;
}

TEST(Table, EmptyHeaderOnlyAndAllSkipped) {
  auto empty = parse_columns("", "e.tsv", {"text"}, opts(TableFormat::kTsv));
  EXPECT_TRUE(empty.rows.empty());
  EXPECT_NE(error_of([&] { require_rows(empty); }).find("e.tsv is empty"), std::string::npos);
  auto only_bom = parse_columns("\xEF\xBB\xBF\n\n", "b.csv", {"0"}, opts(TableFormat::kCsv));
  EXPECT_NE(error_of([&] { require_rows(only_bom); }).find("is empty"), std::string::npos);
  auto header = parse_columns("text\tlabel\n", "h.tsv", {"text"}, opts(TableFormat::kTsv));
  EXPECT_NE(error_of([&] { require_rows(header); }).find("h.tsv has a header line but no data"),
            std::string::npos);
  auto skipped = parse_columns("a\tb\n1\n2\n", "k.tsv", {"b"}, opts(TableFormat::kTsv, true, true));
  EXPECT_EQ(skipped.skipped_rows, 2);
  EXPECT_NE(error_of([&] { require_rows(skipped); }).find("all 2 data row(s) were malformed"),
            std::string::npos);
}

TEST(Table, ReadColumnsFromFile) {
  auto dir =
      std::filesystem::temp_directory_path() / ("bertfit_table_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string path = (dir / "d.csv").string();
  std::ofstream(path) << "text,label\n\"hello, world\",1\n";
  auto t = read_columns(path, {"text", "label"});  // CSV from the extension
  EXPECT_EQ(t.rows, (Rows{{"hello, world", "1"}}));
  EXPECT_EQ(t.path, path);
  std::string missing = (dir / "missing.tsv").string();
  EXPECT_NE(error_of([&] { read_columns(missing, {"0"}); }).find(missing), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace bertfit
