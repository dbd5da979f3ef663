// Golden check of the WordPiece tokenizer against transformers 4.28's slow BertTokenizer: every
// row of ../shared/golden/tokenizer/*.jsonl (ids of each text alone, and the [CLS] a [SEP] b
// [SEP] encoding truncated longest_first to 128) is reproduced exactly, from vocab.txt and from
// tokenizer.json.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "tokenizer/wordpiece.h"

namespace bertfit {
namespace {

const std::string kShared = BERTFIT_SHARED_DIR;
const std::string kVocab = kShared + "/data/vocab/bert-base-uncased.txt";
const std::string kTokenizerJson = kShared + "/data/vocab/bert-base-uncased-tokenizer.json";
constexpr int kMaxLen = 128;

std::vector<std::string> golden_files() {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(kShared + "/golden/tokenizer")) {
    if (e.path().extension() == ".jsonl") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Checks every row of one file; returns the number of rows checked.
int check_file(const WordPieceTokenizer& tok, const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  std::string line;
  int rows = 0, failures = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto row = nlohmann::json::parse(line);
    const std::string where = path + " row " + std::to_string(rows);
    const std::string a = row.at("text_a");
    const bool pair = !row.at("text_b").is_null();
    const auto a_ids = tok.tokenize_ids(a);
    const auto want_a = row.at("a").get<std::vector<std::int32_t>>();
    bool ok = a_ids == want_a;
    std::optional<std::string> b;
    std::optional<std::vector<std::int32_t>> b_ids;
    if (pair) {
      b = row.at("text_b").get<std::string>();
      b_ids = tok.tokenize_ids(*b);
      ok = ok && *b_ids == row.at("b").get<std::vector<std::int32_t>>();
    }
    const Encoding e =
        tok.encode(a, b ? std::optional<std::string_view>(*b) : std::nullopt, kMaxLen);
    const Encoding e2 = tok.encode_ids(a_ids, b_ids, kMaxLen);
    const auto want_ids = row.at("input_ids").get<std::vector<std::int32_t>>();
    const auto want_types = row.at("token_type_ids").get<std::vector<std::int32_t>>();
    ok =
        ok && e.input_ids == want_ids && e.token_type_ids == want_types &&
        e2.input_ids == want_ids && e2.token_type_ids == want_types &&
        e.attention_mask.size() == want_ids.size() &&
        std::all_of(e.attention_mask.begin(), e.attention_mask.end(), [](int m) { return m == 1; });
    if (!ok && ++failures <= 5) {
      ADD_FAILURE() << where << ": text_a=" << nlohmann::json(a).dump()
                    << (pair ? " text_b=" + nlohmann::json(*b).dump() : std::string())
                    << "\n got a=" << nlohmann::json(a_ids).dump()
                    << "\nwant a=" << row.at("a").dump()
                    << (pair ? "\n got b=" + nlohmann::json(*b_ids).dump() +
                                   "\nwant b=" + row.at("b").dump()
                             : std::string())
                    << "\n got input_ids=" << nlohmann::json(e.input_ids).dump()
                    << "\nwant input_ids=" << row.at("input_ids").dump();
    }
    ++rows;
  }
  EXPECT_EQ(failures, 0) << path;
  return rows;
}

TEST(TokenizerGolden, VocabTxtReproducesEveryRow) {
  const auto tok = WordPieceTokenizer::from_vocab_file(kVocab);
  const auto files = golden_files();
  ASSERT_GE(files.size(), 8u);
  int total = 0;
  for (const auto& f : files) total += check_file(tok, f);
  std::cout << "[golden] vocab.txt: " << total << " rows checked in " << files.size() << " files\n";
  RecordProperty("rows_checked", total);
  EXPECT_GT(total, 10000);
}

TEST(TokenizerGolden, TokenizerJsonReproducesEveryRow) {
  const auto tok = WordPieceTokenizer::from_tokenizer_json(kTokenizerJson);
  EXPECT_EQ(tok.vocab_size(), 30522);
  EXPECT_TRUE(tok.lowercase());
  int total = 0;
  for (const auto& f : golden_files()) total += check_file(tok, f);
  std::cout << "[golden] tokenizer.json: " << total << " rows checked\n";
  EXPECT_GT(total, 10000);
}

TEST(TokenizerGolden, GoldenTruncatesSomePairs) {
  // The golden data must exercise truncation, or the encode check above proves little about it.
  int truncated = 0;
  for (const auto& f : golden_files()) {
    std::ifstream in(f);
    std::string line;
    while (std::getline(in, line)) {
      const auto row = nlohmann::json::parse(line);
      const std::size_t full =
          row.at("a").size() + (row.at("b").is_null() ? 2 : row.at("b").size() + 3);
      if (full > static_cast<std::size_t>(kMaxLen)) ++truncated;
    }
  }
  std::cout << "[golden] rows longer than " << kMaxLen << ": " << truncated << "\n";
  EXPECT_GT(truncated, 0);
}

}  // namespace
}  // namespace bertfit
