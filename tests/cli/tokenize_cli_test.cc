// `bertfit tokenize` end to end: output equal to the tokenizer's ids for real MRPC rows, and
// bad input (missing file, empty file, invalid UTF-8, a row with too few columns, an unknown
// column name) gives a one-line error and a non-zero exit, never a crash.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_util.h"

namespace bertfit::testing {
namespace {

std::string vocab() { return shared_dir() + "/data/vocab/bert-base-uncased.txt"; }

TEST(TokenizeCli, EncodesPairsAsTheGoldenIds) {
  // The first MRPC dev pair, as ../shared/golden/tokenizer/MRPC-dev.jsonl has it.
  std::string golden = read_text(shared_dir() + "/golden/tokenizer/MRPC-dev.jsonl");
  auto want = nlohmann::json::parse(golden.substr(0, golden.find('\n')));
  RunResult r = run_bertfit("tokenize --vocab " + vocab() + " --input " + shared_dir() +
                            "/data/glue/MRPC/dev.tsv --text-a-column 3 --text-b-column 4"
                            " --max-seq-len 128");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 408);
  auto got = nlohmann::json::parse(r.out.substr(0, r.out.find('\n')));
  EXPECT_EQ(got["input_ids"], want["input_ids"]);
  EXPECT_EQ(got["token_type_ids"], want["token_type_ids"]);
}

void expect_clean_failure(const std::string& args, const std::string& needle) {
  RunResult r = run_bertfit(args);
  EXPECT_NE(r.exit_code, 0) << args;
  EXPECT_LT(r.exit_code, 128) << "killed by a signal: " << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(TokenizeCli, BadInputFailsCleanly) {
  TempDir tmp;
  const std::string base = "tokenize --vocab " + vocab() + " --input ";
  expect_clean_failure(base + (tmp / "missing.tsv") + " --text-a-column 0", "missing.tsv");
  write_text(tmp / "empty.tsv", "");
  expect_clean_failure(base + (tmp / "empty.tsv") + " --text-a-column 0", "empty.tsv");
  write_text(tmp / "short.tsv", "a\tb\nx\ty\nonly-one-field\n");
  expect_clean_failure(base + (tmp / "short.tsv") + " --text-a-column a --text-b-column b",
                       "short.tsv:3");
  expect_clean_failure(base + (tmp / "short.tsv") + " --text-a-column nope", "nope");
  // Invalid UTF-8 is an error naming the line (it was silently dropped once), or with
  // --skip-malformed a skipped row.
  write_text(tmp / "bad.tsv", "text\nab\xff\xfe cd\nfine\n\xc3\n");
  expect_clean_failure(base + (tmp / "bad.tsv") + " --text-a-column text", "bad.tsv:2");
  RunResult r = run_bertfit(base + (tmp / "bad.tsv") + " --text-a-column text --skip-malformed");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1);
  EXPECT_NE(r.err.find("skipped 2"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace bertfit::testing
