// Golden check of the tokenizer.json byte-level BPE read as the Hugging Face tokenizers library
// runs it (kFastByteLevelBpe; ModernBERT's form): every row of
// ../shared/golden/tokenizer-modernbert/modernbert-ids.jsonl (made by the tokenizers npm binding
// 0.23.2: each text alone without specials, the TemplateProcessing encoding [CLS] A [SEP]
// (B [SEP]) truncated longest_first to 128, offsets in code points per text with (0, 0) on the
// specials, and for CoNLL rows each word alone as is_split_into_words=True tokenizes it, with no
// prefix space, and the words' encoding) is reproduced exactly, through load_tokenizer on the
// tokenizer folder and on ../shared/golden/modernbert-tiny/model, and through the tokenizer.json
// alone. Decoding gives each text back (byte-level BPE loses nothing).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file.h"
#include "tests/util/temp_dir.h"
#include "tokenizer/tokenizer.h"

namespace bertfit {
namespace {

const std::string kGolden = std::string(BERTFIT_SHARED_DIR) + "/golden/tokenizer-modernbert";
constexpr int kMaxLen = 128;
using Ids = std::vector<std::int32_t>;

std::vector<std::pair<std::int64_t, std::int64_t>> pairs(const std::vector<TokenOffset>& o) {
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (const TokenOffset& x : o) out.emplace_back(x.begin, x.end);
  return out;
}

// Checks every row; returns the number of rows checked.
int check_all(const Tokenizer& tok) {
  int rows = 0, failures = 0;
  auto fail = [&](const std::string& where, const nlohmann::json& want, const nlohmann::json& got) {
    if (++failures <= 5) {
      ADD_FAILURE() << where << "\n  want " << want.dump() << "\n  got  " << got.dump();
    }
  };
  std::ifstream in(kGolden + "/modernbert-ids.jsonl");
  EXPECT_TRUE(in);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto row = nlohmann::json::parse(line);
    const std::string where = row["file"].get<std::string>() + " row " + row["row"].dump();
    const std::string a = row["text_a"];
    std::vector<std::int32_t> a_ids, b_ids;
    std::vector<TokenOffset> a_offs, b_offs;
    tok.tokenize_into(a, a_ids, &a_offs);
    if (a_ids != row["a"].get<Ids>()) fail(where + " a: " + a, row["a"], a_ids);
    std::optional<std::string> b;
    if (!row["text_b"].is_null()) {
      b = row["text_b"].get<std::string>();
      tok.tokenize_into(*b, b_ids, &b_offs);
      if (b_ids != row["b"].get<Ids>()) fail(where + " b: " + *b, row["b"], b_ids);
    }
    const Encoding e = tok.encode(a, b ? std::optional<std::string_view>(*b) : std::nullopt,
                                  kMaxLen, /*with_offsets=*/true);
    if (e.input_ids != row["input_ids"].get<Ids>()) {
      fail(where + " input_ids", row["input_ids"], e.input_ids);
    }
    if (e.token_type_ids != Ids(e.input_ids.size(), 0)) {
      fail(where + " token_type_ids", Ids(e.input_ids.size(), 0), e.token_type_ids);
    }
    // The golden offsets count code points in each text: the same template over each text's
    // offsets converted to code points.
    std::vector<TokenOffset> a_chars = byte_to_char_offsets(a, a_offs);
    std::vector<TokenOffset> b_chars = b ? byte_to_char_offsets(*b, b_offs) : b_offs;
    const Encoding chars = tok.encode_ids(a_ids, b ? std::optional<Ids>(b_ids) : std::nullopt,
                                          kMaxLen, &a_chars, b ? &b_chars : nullptr);
    const auto want_offsets =
        row["offsets"].get<std::vector<std::pair<std::int64_t, std::int64_t>>>();
    if (pairs(chars.offsets) != want_offsets) {
      fail(where + " offsets", row["offsets"], pairs(chars.offsets));
    }
    if (chars.input_ids != e.input_ids) fail(where + " encode_ids", e.input_ids, chars.input_ids);
    if (row.contains("words")) {
      const auto words = row["words"].get<std::vector<std::string>>();
      Ids all;
      for (std::size_t w = 0; w < words.size(); ++w) {
        Ids ids;
        tok.tokenize_word_into(words[w], ids);
        if (ids != row["words_ids"][w].get<Ids>()) {
          fail(where + " word " + words[w], row["words_ids"][w], ids);
        }
        all.insert(all.end(), ids.begin(), ids.end());
      }
      const Encoding we = tok.encode_ids(all, std::nullopt, kMaxLen);
      if (we.input_ids != row["words_input_ids"].get<Ids>()) {
        fail(where + " words_input_ids", row["words_input_ids"], we.input_ids);
      }
    }
    ++rows;
  }
  EXPECT_EQ(failures, 0) << "rows with a mismatch (first 5 shown)";
  return rows;
}

void expect_modernbert_specials(const Tokenizer& tok) {
  EXPECT_EQ(tok.kind(), TokenizerKind::kFastByteLevelBpe);
  EXPECT_EQ(tok.pair_template(), PairTemplate::kTemplate);
  EXPECT_EQ(tok.pair_truncation(), PairTruncation::kHalves);
  EXPECT_EQ(tok.unk_id(), 0);
  EXPECT_EQ(tok.cls_id(), 1);
  EXPECT_EQ(tok.sep_id(), 2);
  EXPECT_EQ(tok.pad_id(), 3);
  EXPECT_EQ(tok.mask_id(), 4);
  EXPECT_EQ(tok.vocab_size(), 8003);
  EXPECT_EQ(tok.num_special_tokens(false), 2);
  EXPECT_EQ(tok.num_special_tokens(true), 3);
  for (std::int32_t id : {0, 1, 2, 3, 4, 8001, 8002}) EXPECT_TRUE(tok.is_special_id(id)) << id;
  EXPECT_FALSE(tok.is_special_id(8000));  // |||IP_ADDRESS||| is added but not special
}

TEST(FastBpeGolden, ModernBertTokenizerFolder) {
  const auto tok = load_tokenizer(kGolden + "/tokenizer");
  expect_modernbert_specials(*tok);
  EXPECT_EQ(check_all(*tok), 2953);
}

TEST(FastBpeGolden, ModernBertModelFolder) {
  const auto tok =
      load_tokenizer(std::string(BERTFIT_SHARED_DIR) + "/golden/modernbert-tiny/model");
  expect_modernbert_specials(*tok);
  EXPECT_EQ(check_all(*tok), 2953);
}

TEST(FastBpeGolden, TokenizerJsonAlone) {
  // No settings files: the specials come from the template and the added tokens.
  const auto tok = load_tokenizer_file(kGolden + "/tokenizer/tokenizer.json");
  expect_modernbert_specials(*tok);
  EXPECT_EQ(check_all(*tok), 2953);
}

TEST(FastBpeGolden, DecodeGivesTheTextsBack) {
  const auto tok = load_tokenizer(kGolden + "/tokenizer");
  std::ifstream in(kGolden + "/modernbert-ids.jsonl");
  std::string line;
  int rows = 0, failures = 0;
  while (std::getline(in, line)) {
    const auto row = nlohmann::json::parse(line);
    for (const char* key : {"a", "b"}) {
      if (row[key].is_null()) continue;
      const std::string text = row[std::string("text_") + key];
      const Ids ids = row[key].get<Ids>();
      // Specials written in the text ([CLS], [MASK] with the space it ate) are dropped when
      // skipped; with them kept, every byte comes back, |||IP_ADDRESS||| in line.
      const std::string kept = tok->decode(ids, /*skip_special_tokens=*/false, false);
      const bool lstripped = text.find(" [MASK]") != std::string::npos;
      if (!lstripped && kept != text && ++failures <= 5) {
        ADD_FAILURE() << "decode " << row["file"] << " " << row["row"] << "\n  want " << text
                      << "\n  got  " << kept;
      }
      ++rows;
    }
  }
  EXPECT_EQ(failures, 0);
  EXPECT_GT(rows, 3000);
  // The template's specials are skipped, the non-special added token is not, all in line (the
  // npm binding's decode gives "Hi |||IP_ADDRESS||| there , it'sb" and
  // "[CLS]Hi |||IP_ADDRESS||| there ,[MASK] it's[SEP]b[SEP]"); then clean-up as the folder's
  // clean_up_tokenization_spaces (true) asks, as PreTrainedTokenizerFast._decode does.
  const Encoding e = tok->encode("Hi |||IP_ADDRESS||| there , [MASK] it's", "b", 32);
  EXPECT_EQ(tok->decode(e.input_ids, true), "Hi |||IP_ADDRESS||| there, it'sb");
  EXPECT_EQ(tok->decode(e.input_ids, false),
            "[CLS]Hi |||IP_ADDRESS||| there,[MASK] it's[SEP]b[SEP]");
}

// [MASK]'s lstrip eats Unicode whitespace (not U+001C, which Python's isspace counts) and its
// offsets cover what it ate; U+00A0 is not eaten by a token without rstrip. The ids and
// character offsets the tokenizers npm binding 0.23.2 gives for this text.
TEST(FastBpeGolden, AddedTokenStripsAsTheTokenizersLibrary) {
  const auto tok = load_tokenizer(kGolden + "/tokenizer");
  const std::string text = "a  \x1c[MASK] x [MASK]\u00a0y";
  const Encoding e = tok->encode(text, std::nullopt, 128, /*with_offsets=*/true);
  EXPECT_EQ(e.input_ids, (Ids{1, 69, 225, 225, 221, 4, 3320, 4, 131, 259, 93, 2}));
  const std::vector<std::pair<std::int64_t, std::int64_t>> want = {
      {0, 0},   {0, 1},   {1, 2},   {2, 3},   {3, 4},   {4, 10},
      {10, 12}, {12, 19}, {19, 20}, {19, 20}, {20, 21}, {0, 0}};
  std::vector<TokenOffset> inner(e.offsets.begin() + 1, e.offsets.end() - 1);
  std::vector<TokenOffset> chars = byte_to_char_offsets(text, inner);
  chars.insert(chars.begin(), TokenOffset{});
  chars.push_back({});
  EXPECT_EQ(pairs(chars), want);
}

TEST(FastBpeGolden, TruncatesPairsAsTheTokenizersLibrary) {
  const auto tok = load_tokenizer(kGolden + "/tokenizer");
  const Ids a(10, 7), b(20, 9);
  // Budget 9 (12 - 3): the shorter a keeps 4, the longer b 5 (the slow rule keeps a 5, b 4).
  Encoding e = tok->encode_ids(a, b, 12);
  EXPECT_EQ(std::count(e.input_ids.begin(), e.input_ids.end(), 7), 4);
  EXPECT_EQ(std::count(e.input_ids.begin(), e.input_ids.end(), 9), 5);
  // Only the longer one is cut while the shorter fits in what it leaves.
  e = tok->encode_ids(Ids(3, 7), b, 12);
  EXPECT_EQ(std::count(e.input_ids.begin(), e.input_ids.end(), 7), 3);
  EXPECT_EQ(std::count(e.input_ids.begin(), e.input_ids.end(), 9), 6);
  EXPECT_EQ(e.truncated_tokens, 14);
  // Equal lengths: a keeps budget / 2.
  e = tok->encode_ids(Ids(10, 7), Ids(10, 9), 12);
  EXPECT_EQ(std::count(e.input_ids.begin(), e.input_ids.end(), 7), 4);
  EXPECT_EQ(e.input_ids.size(), 12u);
  EXPECT_THROW(tok->encode_ids(a, b, 2), Error);
}

// Which folders get the fast kind: ModernBERT's (model_type), and any tokenizer.json with a
// TemplateProcessing; a PreTrainedTokenizerFast folder with RoBERTa's RobertaProcessing stays
// kByteLevelBpe (its family's kind), and a modernbert folder reads even that one as the library.
TEST(FastBpeGolden, LoadTokenizerChoosesTheFastKind) {
  const std::string roberta_json =
      std::string(BERTFIT_SHARED_DIR) + "/data/roberta-bpe/tokenizer.json";
  testing::TempDir fast_roberta, modern_roberta, template_only;
  std::filesystem::copy_file(roberta_json, fast_roberta / "tokenizer.json");
  write_file_atomic(fast_roberta / "tokenizer_config.json",
                    R"({"tokenizer_class": "PreTrainedTokenizerFast"})");
  EXPECT_EQ(load_tokenizer(fast_roberta.path())->kind(), TokenizerKind::kByteLevelBpe);
  std::filesystem::copy_file(roberta_json, modern_roberta / "tokenizer.json");
  write_file_atomic(modern_roberta / "config.json", R"({"model_type": "modernbert"})");
  const auto modern = load_tokenizer(modern_roberta.path());
  EXPECT_EQ(modern->kind(), TokenizerKind::kFastByteLevelBpe);
  EXPECT_EQ(modern->pair_template(), PairTemplate::kRoberta);  // from RobertaProcessing
  EXPECT_EQ(modern->num_special_tokens(true), 4);
  EXPECT_EQ(modern->tokenize_ids("Hello <mask> world"), (Ids{11973, 4, 1975}));
  EXPECT_EQ(modern->cls_id(), 0);
  EXPECT_EQ(modern->sep_id(), 2);
  std::filesystem::copy_file(kGolden + "/tokenizer/tokenizer.json",
                             template_only / "tokenizer.json");
  EXPECT_EQ(load_tokenizer(template_only.path())->kind(), TokenizerKind::kFastByteLevelBpe);
  // The files its model folders carry.
  const auto sets = tokenizer_file_sets(TokenizerKind::kFastByteLevelBpe);
  ASSERT_EQ(sets.size(), 1u);
  EXPECT_STREQ(sets[0][0], "tokenizer.json");
  EXPECT_EQ(sets[0][1], nullptr);
}

// A post-processor or decoder it cannot honour is refused with one line naming the file.
TEST(FastBpeGolden, RefusesWhatItCannotRun) {
  const auto base = nlohmann::json::parse(read_file(kGolden + "/tokenizer/tokenizer.json"));
  testing::TempDir tmp;
  auto expect_refused = [&](const nlohmann::json& j, const std::string& needle) {
    const std::string path = tmp / "tokenizer.json";
    write_file_atomic(path, j.dump());
    try {
      load_tokenizer_file(path);
      ADD_FAILURE() << "accepted: " << needle;
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(path), std::string::npos) << what;
      EXPECT_NE(what.find(needle), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  };
  nlohmann::json j = base;
  j["post_processor"]["single"].erase(1);  // no $A
  expect_refused(j, "post_processor.single must hold the sequence A once");
  j = base;
  j["post_processor"]["pair"][3]["Sequence"]["id"] = "C";
  expect_refused(j, "a Sequence is \"A\" or \"B\"");
  j = base;
  j["post_processor"]["special_tokens"].erase("[SEP]");
  expect_refused(j, "special_tokens has no ids for \"[SEP]\"");
  j = base;
  j["decoder"] = {{"type", "WordPiece"}};
  expect_refused(j, "decoder \"WordPiece\" is not supported");
  j = base;
  j["pre_tokenizer"]["use_regex"] = false;
  expect_refused(j, "use_regex false");
}

}  // namespace
}  // namespace bertfit
