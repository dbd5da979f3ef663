// Golden check of the byte-level BPE and SentencePiece tokenizers against transformers 4.28's
// slow RobertaTokenizer, XLMRobertaTokenizer and DebertaV2Tokenizer: every row of
// ../shared/golden/tokenizer-families/{roberta-bpe,spm,deberta-spm}-*.jsonl (each text alone,
// the template encoding truncated longest_first to 128, and for CoNLL rows each word alone as
// is_split_into_words=True tokenizes it) is reproduced exactly, through load_tokenizer on the
// folders ../shared/data/roberta-bpe, ../shared/data/spm, ../shared/data/deberta-spm and
// ../shared/golden/deberta-v3-tiny/model, through roberta-bpe's tokenizer.json, and through the
// tokenizer.json that the Hugging Face tokenizers library converted from DeBERTa's spm.model
// (tests/fixtures/deberta/, made by tests/fixtures/make_deberta_tokenizer_json.js).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "tokenizer/bpe.h"
#include "tokenizer/sentencepiece.h"
#include "tokenizer/tokenizer.h"

namespace bertfit {
namespace {

const std::string kShared = BERTFIT_SHARED_DIR;
constexpr int kMaxLen = 128;
using Ids = std::vector<std::int32_t>;

std::vector<std::string> golden_files(const std::string& prefix) {
  std::vector<std::string> files;
  for (const auto& e :
       std::filesystem::directory_iterator(kShared + "/golden/tokenizer-families")) {
    const std::string name = e.path().filename().string();
    if (name.starts_with(prefix) && e.path().extension() == ".jsonl") {
      files.push_back(e.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

// BERT's token types of an encoding: 0 up to the first [SEP], 1 after it.
Ids bert_types(const Ids& input_ids, std::int32_t sep) {
  Ids types(input_ids.size(), 0);
  const auto first_sep = std::find(input_ids.begin(), input_ids.end(), sep);
  for (auto it = first_sep + (first_sep != input_ids.end()); it < input_ids.end(); ++it) {
    types[static_cast<std::size_t>(it - input_ids.begin())] = 1;
  }
  return types;
}

// Checks every row of every file; returns the number of rows checked.
int check_all(const Tokenizer& tok, const std::string& prefix) {
  int rows = 0, failures = 0;
  auto fail = [&](const std::string& where, const nlohmann::json& want, const Ids& got) {
    if (++failures <= 5) {
      ADD_FAILURE() << where << "\n  want " << want.dump() << "\n  got  "
                    << nlohmann::json(got).dump();
    }
  };
  for (const std::string& path : golden_files(prefix)) {
    std::ifstream in(path);
    EXPECT_TRUE(in) << path;
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      const auto row = nlohmann::json::parse(line);
      const std::string where = path + " row " + row["row"].dump();
      const std::string a = row["text_a"];
      const Ids got_a = tok.tokenize_ids(a);
      if (got_a != row["a"].get<Ids>()) fail(where + " a: " + a, row["a"], got_a);
      std::optional<std::string> b;
      if (!row["text_b"].is_null()) {
        b = row["text_b"].get<std::string>();
        const Ids got_b = tok.tokenize_ids(*b);
        if (got_b != row["b"].get<Ids>()) fail(where + " b: " + *b, row["b"], got_b);
      }
      const Encoding e = tok.encode(a, b ? std::optional<std::string_view>(*b) : std::nullopt,
                                    kMaxLen, /*with_offsets=*/true);
      if (e.input_ids != row["input_ids"].get<Ids>()) {
        fail(where + " input_ids", row["input_ids"], e.input_ids);
      }
      // The template's token types (the rows hold none): BERT's for DeBERTa, zeros otherwise.
      const Ids want_types = tok.pair_template() == PairTemplate::kBert
                                 ? bert_types(row["input_ids"].get<Ids>(), tok.sep_id())
                                 : Ids(e.input_ids.size(), 0);
      if (e.token_type_ids != want_types)
        fail(where + " token_type_ids", want_types, e.token_type_ids);
      if (e.offsets.size() != e.input_ids.size()) fail(where + " offsets", {}, {});
      if (row.contains("words")) {
        const auto words = row["words"].get<std::vector<std::string>>();
        for (std::size_t w = 0; w < words.size(); ++w) {
          Ids ids;
          tok.tokenize_word_into(words[w], ids);
          if (ids != row["words_ids"][w].get<Ids>()) {
            fail(where + " word " + words[w], row["words_ids"][w], ids);
          }
        }
      }
      ++rows;
    }
  }
  EXPECT_EQ(failures, 0) << "rows with a mismatch (first 5 shown)";
  return rows;
}

TEST(FamiliesGolden, RobertaBpeFromVocabJsonAndMerges) {
  const auto tok = load_tokenizer(kShared + "/data/roberta-bpe");
  ASSERT_EQ(tok->kind(), TokenizerKind::kByteLevelBpe);
  EXPECT_EQ(tok->cls_id(), 0);
  EXPECT_EQ(tok->pad_id(), 1);
  EXPECT_EQ(tok->sep_id(), 2);
  EXPECT_EQ(tok->unk_id(), 3);
  EXPECT_EQ(tok->mask_id(), 4);
  EXPECT_EQ(tok->max_id(), 51999);
  EXPECT_EQ(check_all(*tok, "roberta-bpe-"), 408 + 277 + 872 + 3250);
}

TEST(FamiliesGolden, RobertaBpeFromTokenizerJson) {
  const auto tok = ByteLevelBpeTokenizer::from_tokenizer_json(
      kShared + "/data/roberta-bpe/tokenizer.json", kShared + "/data/roberta-bpe");
  EXPECT_EQ(check_all(*tok, "roberta-bpe-"), 408 + 277 + 872 + 3250);
}

TEST(FamiliesGolden, XlmRobertaSentencePiece) {
  const auto tok = load_tokenizer(kShared + "/data/spm");
  ASSERT_EQ(tok->kind(), TokenizerKind::kSentencePiece);
  EXPECT_EQ(tok->cls_id(), 0);
  EXPECT_EQ(tok->pad_id(), 1);
  EXPECT_EQ(tok->sep_id(), 2);
  EXPECT_EQ(tok->unk_id(), 3);
  EXPECT_EQ(tok->mask_id(), tok->max_id());
  EXPECT_EQ(check_all(*tok, "spm-"), 408 + 277 + 872 + 3250);
}

// ../shared/data/spm/tokenizer.json alone: the spm model is rebuilt from it (Precompiled
// charsmap, BPE pieces scored by id) and gives tokenizer.json's ids, which are the spm model's
// own; XLMRobertaTokenizer (the golden rows) adds 1 to every one of them (unknown characters
// included: this model's spm <unk> is id 3). So every golden id minus 1, special tokens aside.
TEST(FamiliesGolden, SentencePieceFromTokenizerJsonIsTheSameModel) {
  const auto tok = load_tokenizer_file(kShared + "/data/spm/tokenizer.json");
  ASSERT_EQ(tok->kind(), TokenizerKind::kSentencePiece);
  EXPECT_EQ(tok->cls_id(), 0);
  EXPECT_EQ(tok->pad_id(), 1);
  EXPECT_EQ(tok->sep_id(), 2);
  EXPECT_EQ(tok->unk_id(), 3);
  EXPECT_EQ(tok->mask_id(), 50001);
  EXPECT_EQ(tok->max_id(), 50001);
  int rows = 0, failures = 0;
  for (const std::string& path : golden_files("spm-")) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      const auto row = nlohmann::json::parse(line);
      for (const char* side : {"a", "b"}) {
        if (row[side].is_null()) continue;
        Ids want = row[side].get<Ids>();
        for (std::int32_t& id : want) --id;
        const std::string text = row[side == std::string("a") ? "text_a" : "text_b"];
        const Ids got = tok->tokenize_ids(text);
        if (got != want && ++failures <= 5) {
          ADD_FAILURE() << path << " row " << row["row"] << " " << side << ": " << text
                        << "\n  want " << nlohmann::json(want).dump() << "\n  got  "
                        << nlohmann::json(got).dump();
        }
      }
      ++rows;
    }
  }
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(rows, 408 + 277 + 872 + 3250);
}

constexpr int kDebertaRows = 408 + 277 + 872 + 3250;

void expect_deberta_ids(const Tokenizer& tok) {
  ASSERT_EQ(tok.kind(), TokenizerKind::kDebertaSentencePiece);
  EXPECT_EQ(tok.pair_template(), PairTemplate::kBert);
  EXPECT_EQ(tok.pad_id(), 0);
  EXPECT_EQ(tok.cls_id(), 1);
  EXPECT_EQ(tok.sep_id(), 2);
  EXPECT_EQ(tok.unk_id(), 3);
  EXPECT_EQ(tok.mask_id(), 8000);
  EXPECT_EQ(tok.max_id(), 8000);
  EXPECT_EQ(tok.token(8000), "[MASK]");
  EXPECT_EQ(tok.token(5), "\u2581the");
}

// The golden model's folder: spm.model with added_tokens.json, tokenizer_config.json and
// special_tokens_map.json.
TEST(FamiliesGolden, DebertaSentencePieceFromSpmModel) {
  const auto tok = load_tokenizer(kShared + "/golden/deberta-v3-tiny/model");
  expect_deberta_ids(*tok);
  EXPECT_EQ(check_all(*tok, "deberta-spm-"), kDebertaRows);
}

// spm.model alone (no settings files: DebertaV2Tokenizer's defaults, [MASK] added after the
// pieces by sanitize_special_tokens), as a folder and as a file.
TEST(FamiliesGolden, DebertaSentencePieceFromSpmModelAlone) {
  const auto folder = load_tokenizer(kShared + "/data/deberta-spm");
  expect_deberta_ids(*folder);
  EXPECT_EQ(check_all(*folder, "deberta-spm-"), kDebertaRows);
  const auto file = load_tokenizer_file(kShared + "/data/deberta-spm/spm.model");
  expect_deberta_ids(*file);
}

// The fast tokenizer's file (Unigram + Metaspace, DebertaV2Converter's normalizer and template)
// gives the same ids as spm.model on every row.
TEST(FamiliesGolden, DebertaTokenizerJsonEqualsSpmModel) {
  const std::string fixture = std::string(BERTFIT_SOURCE_DIR) + "/tests/fixtures/deberta";
  const auto tok = load_tokenizer_file(fixture + "/tokenizer.json");
  expect_deberta_ids(*tok);
  EXPECT_EQ(check_all(*tok, "deberta-spm-"), kDebertaRows);
}

}  // namespace
}  // namespace bertfit
