// `bertfit tokenize` end to end: output equal to the tokenizer's ids for real MRPC rows (WordPiece,
// byte-level BPE from vocab.json + merges.txt or tokenizer.json, SentencePiece, ModernBERT's
// tokenizer.json), and
// bad input (missing file, empty file, invalid UTF-8, a row with too few columns, an unknown
// column name) gives a one-line error and a non-zero exit, never a crash.
#include <gtest/gtest.h>

#include <algorithm>
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

// Every MRPC dev pair through `tokenize --model DIR` (or --tokenizer FILE) equals the golden
// RobertaTokenizer / XLMRobertaTokenizer / DebertaV2Tokenizer ids of
// ../shared/golden/tokenizer-families; token types are zeros, or BERT's 0/1 with bert_types.
void expect_family_golden(const std::string& source, const std::string& golden_file,
                          bool bert_types = false) {
  RunResult r = run_bertfit("tokenize " + source + " --input " + shared_dir() +
                            "/data/glue/MRPC/dev.tsv --text-a-column 3 --text-b-column 4"
                            " --max-seq-len 128");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string golden = read_text(shared_dir() + "/golden/tokenizer-families/" + golden_file);
  std::size_t g = 0, o = 0;
  int rows = 0;
  while (g < golden.size() && o < r.out.size()) {
    const std::size_t ge = golden.find('\n', g), oe = r.out.find('\n', o);
    const auto want = nlohmann::json::parse(golden.substr(g, ge - g));
    const auto got = nlohmann::json::parse(r.out.substr(o, oe - o));
    EXPECT_EQ(got["input_ids"], want["input_ids"]) << source << " row " << rows;
    std::vector<int> types(want["input_ids"].size(), 0);
    if (bert_types) {  // 1 after the first [SEP] (id 2)
      const auto ids = want["input_ids"].get<std::vector<int>>();
      const auto sep = std::find(ids.begin(), ids.end(), 2);
      for (auto it = sep + 1; sep != ids.end() && it < ids.end(); ++it) types[it - ids.begin()] = 1;
    }
    EXPECT_EQ(got["token_type_ids"], nlohmann::json(types)) << source << " row " << rows;
    g = ge + 1;
    o = oe + 1;
    ++rows;
  }
  EXPECT_EQ(rows, 408) << source;
}

TEST(TokenizeCli, RobertaAndXlmRobertaTokenizersMatchTheGoldenIds) {
  // Folders holding only tokenizer files (no config.json, no weights).
  expect_family_golden("--model " + shared_dir() + "/data/roberta-bpe",
                       "roberta-bpe-MRPC-dev.jsonl");
  expect_family_golden("--tokenizer " + shared_dir() + "/data/roberta-bpe/tokenizer.json",
                       "roberta-bpe-MRPC-dev.jsonl");
  expect_family_golden("--model " + shared_dir() + "/data/spm", "spm-MRPC-dev.jsonl");
  expect_family_golden("--tokenizer " + shared_dir() + "/data/spm/sentencepiece.bpe.model",
                       "spm-MRPC-dev.jsonl");
}

// DeBERTa-v3: the golden model's folder (spm.model and its settings files, no family needed to
// tokenize), spm.model alone, and the fast tokenizer's tokenizer.json converted from it.
TEST(TokenizeCli, DebertaTokenizerMatchesTheGoldenIds) {
  expect_family_golden("--model " + shared_dir() + "/golden/deberta-v3-tiny/model",
                       "deberta-spm-MRPC-dev.jsonl", true);
  expect_family_golden("--tokenizer " + shared_dir() + "/data/deberta-spm/spm.model",
                       "deberta-spm-MRPC-dev.jsonl", true);
  expect_family_golden(
      "--tokenizer " + std::string(BERTFIT_SOURCE_DIR) + "/tests/fixtures/deberta/tokenizer.json",
      "deberta-spm-MRPC-dev.jsonl", true);
}

// ModernBERT's tokenizer.json (../shared/golden/tokenizer-modernbert): the golden ids of the
// tokenizers library for the rows of `file` in modernbert-ids.jsonl (pairs only), token types all
// zero, against `bertfit tokenize <source>` over `input` (columns a and b).
void expect_modernbert_golden(const std::string& source, const std::string& input,
                              const std::string& columns, const std::string& file) {
  RunResult r = run_bertfit("tokenize " + source + " --input " + input + " " + columns +
                            " --max-seq-len 128");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string golden =
      read_text(shared_dir() + "/golden/tokenizer-modernbert/modernbert-ids.jsonl");
  std::size_t g = 0, o = 0;
  int rows = 0;
  while (g < golden.size()) {
    const std::size_t ge = golden.find('\n', g);
    const auto want = nlohmann::json::parse(golden.substr(g, ge - g));
    g = ge + 1;
    if (want["file"] != file || want["text_b"].is_null()) continue;
    ASSERT_LT(o, r.out.size()) << source << ": fewer output lines than golden rows";
    const std::size_t oe = r.out.find('\n', o);
    const auto got = nlohmann::json::parse(r.out.substr(o, oe - o));
    o = oe + 1;
    EXPECT_EQ(got["input_ids"], want["input_ids"]) << source << " " << file << " row " << rows;
    EXPECT_EQ(got["token_type_ids"], nlohmann::json(std::vector<int>(want["input_ids"].size(), 0)))
        << source << " row " << rows;
    ++rows;
  }
  EXPECT_EQ(o, r.out.size()) << source << ": more output lines than golden rows";
  EXPECT_GT(rows, 0);
}

// ModernBERT's byte-level BPE tokenizer.json ([CLS] a [SEP] b [SEP], the tokenizers library's
// semantics): its tokenizer folder and the tiny model's folder (PreTrainedTokenizerFast,
// model_type modernbert) through --model, the file through --tokenizer; every MRPC dev pair, and
// the golden's hard pairs (emoji, added tokens written in the text, [MASK] eating the space
// before it, long texts cut longest-first) written to a JSONL file.
TEST(TokenizeCli, ModernBertTokenizerMatchesTheGoldenIds) {
  const std::string dir = shared_dir() + "/golden/tokenizer-modernbert/tokenizer";
  const std::string mrpc = shared_dir() + "/data/glue/MRPC/dev.tsv";
  const std::string mrpc_columns = "--text-a-column 3 --text-b-column 4";
  expect_modernbert_golden("--model " + dir, mrpc, mrpc_columns, "MRPC-dev");
  expect_modernbert_golden("--model " + shared_dir() + "/golden/modernbert-tiny/model", mrpc,
                           mrpc_columns, "MRPC-dev");
  expect_modernbert_golden("--tokenizer " + dir + "/tokenizer.json", mrpc, mrpc_columns,
                           "MRPC-dev");
  TempDir tmp;
  std::string hard;
  const std::string golden =
      read_text(shared_dir() + "/golden/tokenizer-modernbert/modernbert-ids.jsonl");
  for (std::size_t g = 0, ge; g < golden.size(); g = ge + 1) {
    ge = golden.find('\n', g);
    const auto row = nlohmann::json::parse(golden.substr(g, ge - g));
    if (row["file"] != "hard" || row["text_b"].is_null()) continue;
    hard += nlohmann::json{{"a", row["text_a"]}, {"b", row["text_b"]}}.dump() + "\n";
  }
  write_text(tmp / "hard.jsonl", hard);
  expect_modernbert_golden("--model " + dir, tmp / "hard.jsonl",
                           "--text-a-column a --text-b-column b", "hard");
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

TEST(TokenizeCli, RobertaPairsNeedFourSpecialTokens) {
  TempDir tmp;
  write_text(tmp / "pairs.tsv", "a\tb\nhello\tworld\n");
  expect_clean_failure("tokenize --model " + shared_dir() + "/data/roberta-bpe --input " +
                           (tmp / "pairs.tsv") +
                           " --text-a-column a --text-b-column b --max-seq-len 3",
                       "--max-seq-len must be at least 4");
  expect_clean_failure(
      "tokenize --model " + tmp.path() + " --input " + (tmp / "pairs.tsv") + " --text-a-column a",
      "has no tokenizer files");
}

}  // namespace
}  // namespace bertfit::testing
