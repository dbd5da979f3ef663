// `bertfit predict` through the binary: one output line per input data row, in order, with the
// row's index (and --id-column); a headerless file read with --no-header keeps its first row,
// and without it a warning says the first line was taken as a header; malformed rows are errors
// naming FILE:LINE or, with --skip-malformed, lines that say why; --output writes the same.
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_util.h"

namespace bertfit::testing {
namespace {

std::vector<nlohmann::json> json_lines(const std::string& out) {
  std::vector<nlohmann::json> lines;
  for (std::size_t p = 0, q; (q = out.find('\n', p)) != std::string::npos; p = q + 1)
    lines.push_back(nlohmann::json::parse(out.substr(p, q - p)));
  return lines;
}

class PredictCli : public ::testing::Test {
 protected:
  void SetUp() override { init_tiny_model(tmp_ / "m"); }
  RunResult predict(const std::string& file, const std::string& args) {
    return run_bertfit("predict --model " + (tmp_ / "m") + " --input " + (tmp_ / file) + " " +
                       args);
  }
  TempDir tmp_;
};

TEST_F(PredictCli, HeaderlessFileKeepsEveryRowWithNoHeader) {
  write_text(tmp_ / "pairs.tsv", "a one\tb one\na two\tb two\na three\tb three\n");
  RunResult r = predict("pairs.tsv", "--text-a-column 0 --text-b-column 1 --no-header");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = json_lines(r.out);
  ASSERT_EQ(lines.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(lines[i]["row"], i);
    EXPECT_TRUE(lines[i].contains("label_name"));
    EXPECT_EQ(lines[i]["probabilities"].size(), 2u);
  }
  // Without --no-header the first line is a header, and stderr says so.
  r = predict("pairs.tsv", "--text-a-column 0 --text-b-column 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json_lines(r.out).size(), 2u);
  EXPECT_NE(r.err.find("pairs.tsv:1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--no-header"), std::string::npos) << r.err;
}

TEST_F(PredictCli, LongRunsReportProgress) {
  write_text(tmp_ / "d.tsv", "text\tlabel\na\t0\nb\t1\nc\t0\n");
  ::setenv("BERTFIT_PROGRESS_SECONDS", "0", 1);  // report every batch
  RunResult p = predict("d.tsv", "--text-a-column text --batch-size 1");
  RunResult e = run_bertfit("eval --model " + (tmp_ / "m") + " --dev-file " + (tmp_ / "d.tsv") +
                            " --text-a-column text --label-column label --batch-size 2");
  ::unsetenv("BERTFIT_PROGRESS_SECONDS");
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_NE(p.err.find("predict: 1/3 rows"), std::string::npos) << p.err;
  EXPECT_NE(p.err.find("predict: 3/3 rows"), std::string::npos) << p.err;
  ASSERT_EQ(e.exit_code, 0) << e.err;
  EXPECT_NE(e.err.find("eval: 2/3 rows"), std::string::npos) << e.err;
  // By default a run shorter than 2 s says nothing.
  p = predict("d.tsv", "--text-a-column text --batch-size 1");
  EXPECT_EQ(p.err.find("rows"), std::string::npos) << p.err;
}

TEST_F(PredictCli, SkippedRowsKeepTheirPlaceAndSayWhy) {
  write_text(tmp_ / "d.tsv", "id\ttext\nx1\tfirst\nx2\nx3\tthird\n\nx4\tfourth\n");
  RunResult r = predict("d.tsv", "--text-a-column text --id-column id");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("d.tsv:3"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
  r = predict("d.tsv", "--text-a-column text --id-column id --skip-malformed --output " +
                           (tmp_ / "p.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = json_lines(read_text(tmp_ / "p.jsonl"));
  ASSERT_EQ(lines.size(), 4u);
  const std::vector<std::string> ids = {"x1", "", "x3", "x4"};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(lines[i]["row"], i) << lines[i];
    if (i == 1) {
      EXPECT_EQ(lines[i]["line"], 3);
      EXPECT_NE(lines[i]["skipped"].get<std::string>().find("field"), std::string::npos);
      EXPECT_FALSE(lines[i].contains("label"));
    } else {
      EXPECT_EQ(lines[i]["id"], ids[i]);
      EXPECT_TRUE(lines[i].contains("label"));
    }
  }
}

TEST_F(PredictCli, TooManyFieldsAndInvalidUtf8AreErrorsNamingTheLine) {
  write_text(tmp_ / "d.csv", "text,label\n\"a, b\",1\na, b,1\n");
  RunResult r = predict("d.csv", "--text-a-column text");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("d.csv:3: row has 3 fields but the header names 2"), std::string::npos)
      << r.err;
  write_text(tmp_ / "u.tsv", "text\nfine\nbad \xff byte\n");
  r = predict("u.tsv", "--text-a-column text");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("u.tsv:3"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("UTF-8"), std::string::npos) << r.err;
  write_text(tmp_ / "u.jsonl", "{\"text\": \"fine\"}\n{\"text\": \"bad \xc3\"}\n");
  r = predict("u.jsonl", "--text-a-column text");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("u.jsonl:2"), std::string::npos) << r.err;
  r = predict("u.jsonl", "--text-a-column text --threshold 1.5");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--threshold"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace bertfit::testing
