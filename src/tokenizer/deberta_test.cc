// DeBERTa's SentencePiece tokenizer on awkward texts against transformers 4.28.1's slow
// DebertaV2Tokenizer (tests/fixtures/deberta/slow.json, made by
// tests/fixtures/make_deberta_tokenizer_fixture.py: literal special tokens, do_lower_case,
// split_by_punct, added_tokens.json, is_split_into_words, decode, pair truncation) and against
// the fast tokenizer's character offsets (tests/fixtures/deberta/fast_offsets.json, made by
// make_deberta_tokenizer_json.js); the loader's choice of files and its errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file.h"
#include "tests/util/temp_dir.h"
#include "tokenizer/sentencepiece.h"
#include "tokenizer/tokenizer.h"

namespace bertfit {
namespace {

using Ids = std::vector<std::int32_t>;
const std::string kShared = BERTFIT_SHARED_DIR;
const std::string kModelDir = kShared + "/golden/deberta-v3-tiny/model";
const std::string kFixtures = std::string(BERTFIT_SOURCE_DIR) + "/tests/fixtures/deberta";

nlohmann::json fixture(const std::string& name) {
  return nlohmann::json::parse(read_file(kFixtures + "/" + name));
}

// The golden model's tokenizer files with tokenizer_config.json changed by `changes` (and an
// added_tokens.json when given), as the fixture generator builds its settings.
std::unique_ptr<Tokenizer> setting(const testing::TempDir& dir, const nlohmann::json& changes,
                                   const std::string& added_tokens = "") {
  for (const char* f : {"spm.model", "special_tokens_map.json", "added_tokens.json"}) {
    std::filesystem::copy_file(kModelDir + "/" + f, dir / f,
                               std::filesystem::copy_options::overwrite_existing);
  }
  nlohmann::json config = nlohmann::json::parse(read_file(kModelDir + "/tokenizer_config.json"));
  config.update(changes);
  std::ofstream(dir / "tokenizer_config.json", std::ios::trunc) << config.dump();
  if (!added_tokens.empty())
    std::ofstream(dir / "added_tokens.json", std::ios::trunc) << added_tokens;
  return load_tokenizer(dir.path());
}

TEST(DebertaTokenizer, SlowTokenizerSettingsOnAwkwardTexts) {
  const nlohmann::json slow = fixture("slow.json");
  testing::TempDir plain_dir, lower_dir, punct_dir, both_dir, added_dir, added_lower_dir;
  const auto plain = setting(plain_dir, nlohmann::json::object());
  const auto lower = setting(lower_dir, {{"do_lower_case", true}});
  const auto punct = setting(punct_dir, {{"split_by_punct", true}});
  const auto both = setting(both_dir, {{"do_lower_case", true}, {"split_by_punct", true}});
  const std::string added = R"({"[MASK]": 8000, "newtok": 8001, "Two Words": 8002})";
  const auto with_added = setting(added_dir, nlohmann::json::object(), added);
  const auto with_added_lower = setting(added_lower_dir, {{"do_lower_case", true}}, added);
  const auto& sp = slow["specials"];
  EXPECT_EQ(plain->cls_id(), sp["cls"]);
  EXPECT_EQ(plain->sep_id(), sp["sep"]);
  EXPECT_EQ(plain->pad_id(), sp["pad"]);
  EXPECT_EQ(plain->unk_id(), sp["unk"]);
  EXPECT_EQ(plain->mask_id(), sp["mask"]);
  EXPECT_EQ(plain->vocab_size(), sp["len"]);
  EXPECT_EQ(with_added->vocab_size(), sp["len_added"]);
  EXPECT_EQ(with_added->token(8002), "Two Words");
  EXPECT_EQ(with_added_lower->token(8002), "two words");

  const std::pair<const char*, const Tokenizer*> settings[] = {{"plain", plain.get()},
                                                               {"lower", lower.get()},
                                                               {"punct", punct.get()},
                                                               {"lower_punct", both.get()}};
  int rows = 0;
  for (const auto& row : slow["texts"]) {
    const std::string text = row["text"];
    for (const auto& [name, tok] : settings) {
      EXPECT_EQ(tok->tokenize_ids(text), row["ids"][name].get<Ids>()) << name << ": " << text;
      // Offsets: one per id, in order, on character boundaries of the original text.
      std::vector<std::int32_t> ids;
      std::vector<TokenOffset> offsets;
      tok->tokenize_into(text, ids, &offsets);
      EXPECT_EQ(ids, row["ids"][name].get<Ids>()) << name << ": " << text;
      ASSERT_EQ(offsets.size(), ids.size()) << text;
      for (std::size_t i = 0; i < offsets.size(); ++i) {
        EXPECT_LE(offsets[i].begin, offsets[i].end) << text;
        EXPECT_LE(offsets[i].end, text.size()) << text;
        // (Tokens from one character that lowercases to two share its bytes.)
        if (i > 0) {
          EXPECT_LE(offsets[i - 1].begin, offsets[i].begin) << name << ": " << text;
        }
        for (std::uint32_t at : {offsets[i].begin, offsets[i].end}) {
          EXPECT_TRUE(at == text.size() || (static_cast<unsigned char>(text[at]) & 0xC0) != 0x80)
              << name << ": " << text << " offset " << at;
        }
      }
    }
    EXPECT_EQ(with_added->tokenize_ids(text), row["added"]["added"].get<Ids>()) << text;
    EXPECT_EQ(with_added_lower->tokenize_ids(text), row["added"]["added_lower"].get<Ids>()) << text;
    Ids word;
    plain->tokenize_word_into(text, word);
    EXPECT_EQ(word, row["word_ids"].get<Ids>()) << text;
    const Ids template_ids = row["decode"]["ids"].get<Ids>();
    EXPECT_EQ(plain->encode(text, std::nullopt, 512).input_ids, template_ids) << text;
    EXPECT_EQ(plain->decode(template_ids, false), row["decode"]["keep"].get<std::string>()) << text;
    EXPECT_EQ(plain->decode(template_ids, true), row["decode"]["skip"].get<std::string>()) << text;
    ++rows;
  }
  EXPECT_EQ(rows, 23);
}

TEST(DebertaTokenizer, PairTemplateAndLongestFirstTruncation) {
  const auto tok = load_tokenizer(kModelDir);
  EXPECT_EQ(tok->num_special_tokens(false), 2);
  EXPECT_EQ(tok->num_special_tokens(true), 3);
  int pairs = 0;
  const nlohmann::json slow = fixture("slow.json");
  for (const auto& p : slow["pairs"]) {
    const std::string a = p["a"], b = p["b"];
    const Encoding e = tok->encode(a, std::optional<std::string_view>(b), p["max_len"], true);
    EXPECT_EQ(e.input_ids, p["input_ids"].get<Ids>()) << a << " | " << b;
    EXPECT_EQ(e.token_type_ids, p["token_type_ids"].get<Ids>()) << a << " | " << b;
    ASSERT_EQ(e.offsets.size(), e.input_ids.size());
    EXPECT_EQ(e.offsets.front(), (TokenOffset{0, 0}));  // [CLS]
    EXPECT_EQ(e.offsets.back(), (TokenOffset{0, 0}));   // the last [SEP]
    ++pairs;
  }
  EXPECT_EQ(pairs, 4);
}

// Character offsets equal to DebertaV2TokenizerFast's, through spm.model and through
// tokenizer.json, wherever the two tokenizers give the same ids (they differ only around
// special tokens written in the text, whose spaces the slow tokenizer strips). The offsets are
// libsentencepiece's, with a piece that starts with a run of whitespace starting at the run's
// last character as in the fast tokenizer, and a lone "\u2581" piece (the dummy prefix before
// CJK text) the span of the text's first character as the fast tokenizer's Metaspace aligns
// it; they differ from the fast tokenizer's alignment in one known way, on the text listed: a
// compatibility character NFKC expands to two pieces gives the second piece an empty span.
// Every GLUE and CoNLL text agrees.
TEST(DebertaTokenizer, OffsetsAreTheFastTokenizers) {
  const auto from_spm = load_tokenizer(kModelDir);
  const auto from_json = load_tokenizer_file(kFixtures + "/tokenizer.json");
  const std::vector<std::string> known = {"\uFB01ne \uFF26\uFF35\uFF2C\uFF2C width \u00BD \u2460"};
  const nlohmann::json rows = fixture("fast_offsets.json");
  int equal = 0, differing_ids = 0, known_seen = 0;
  for (const auto& row : rows) {
    const std::string text = row["text"];
    const Ids want_ids = row["ids"].get<Ids>();
    std::vector<TokenOffset> want;
    for (const auto& o : row["offsets"]) want.push_back({o[0].get<std::uint32_t>(), o[1]});
    const bool is_known = std::find(known.begin(), known.end(), text) != known.end();
    known_seen += is_known;
    for (const Tokenizer* tok : {from_spm.get(), from_json.get()}) {
      Ids ids;
      std::vector<TokenOffset> offsets;
      tok->tokenize_into(text, ids, &offsets);
      if (ids != want_ids) {
        ++differing_ids;
        EXPECT_NE(text.find('['), std::string::npos) << "ids differ on " << text;
        continue;
      }
      const std::vector<TokenOffset> got = byte_to_char_offsets(text, offsets);
      if (is_known) {
        EXPECT_NE(got, want) << "now equal: take it off the list: " << text;
      } else {
        EXPECT_EQ(got, want) << text;
        ++equal;
      }
    }
  }
  EXPECT_EQ(known_seen, 1);
  EXPECT_EQ(equal + differing_ids + 2 * known_seen, 2 * 74);
  EXPECT_LE(differing_ids, 4);
}

// A model folder's choice: spm.model for DebertaV2Tokenizer (tokenizer.json beside it is the
// fast tokenizer's copy), tokenizer.json when it is all there is, by tokenizer_class or
// config.json's model_type; the saved files include spm.model.
TEST(DebertaTokenizer, LoaderChoosesTheFolderFiles) {
  testing::TempDir both, json_only, out;
  for (const char* f :
       {"spm.model", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json"}) {
    std::filesystem::copy_file(kModelDir + "/" + f, both / f);
  }
  std::filesystem::copy_file(kFixtures + "/tokenizer.json", both / "tokenizer.json");
  const auto from_both = load_tokenizer(both.path());
  EXPECT_EQ(from_both->kind(), TokenizerKind::kDebertaSentencePiece);
  EXPECT_EQ(from_both->source_files(), std::vector<std::string>{both / "spm.model"});
  std::filesystem::copy_file(kFixtures + "/tokenizer.json", json_only / "tokenizer.json");
  std::ofstream(json_only / "config.json") << R"({"model_type": "deberta-v2"})";
  const auto from_json = load_tokenizer(json_only.path());
  EXPECT_EQ(from_json->kind(), TokenizerKind::kDebertaSentencePiece);
  EXPECT_EQ(from_json->pair_template(), PairTemplate::kBert);
  EXPECT_EQ(from_json->mask_id(), 8000);
  const auto names = copy_tokenizer_files(both.path(), out.path());
  EXPECT_NE(std::find(names.begin(), names.end(), "spm.model"), names.end());
  EXPECT_EQ(read_file(out / "spm.model"), read_file(kModelDir + "/spm.model"));
  EXPECT_EQ(load_tokenizer(out.path())->tokenize_ids("Hello [MASK] world"),
            (Ids{210, 135, 73, 8000, 229}));
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DebertaTokenizer, BadFilesAreOneLineErrors) {
  testing::TempDir d;
  std::filesystem::copy_file(kModelDir + "/spm.model", d / "spm.model");
  std::ofstream(d / "added_tokens.json") << R"({"[MASK]": 8001})";
  std::string msg = error_of([&] { load_tokenizer(d.path()); });
  EXPECT_NE(
      msg.find(d / "added_tokens.json" + ": token \"[MASK]\" has id 8001; the next id is 8000"),
      std::string::npos)
      << msg;
  std::filesystem::remove(d / "added_tokens.json");
  std::ofstream(d / "tokenizer_config.json") << R"({"do_lower_case": "yes"})";
  msg = error_of([&] { load_tokenizer(d.path()); });
  EXPECT_NE(msg.find("do_lower_case"), std::string::npos) << msg;
  std::filesystem::remove(d / "tokenizer_config.json");
  std::ofstream(d / "spm.model", std::ios::trunc) << "not a model";
  msg = error_of([&] { load_tokenizer(d.path()); });
  EXPECT_NE(msg.find(d / "spm.model" + ": not a SentencePiece model"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  // split_by_punct's tokenizer.json: the fast tokenizer's ids are not DebertaV2Tokenizer's.
  nlohmann::json j = fixture("tokenizer.json");
  j["pre_tokenizer"]["pretokenizers"].insert(
      j["pre_tokenizer"]["pretokenizers"].begin(),
      nlohmann::json::object({{"type", "Punctuation"}, {"behavior", "Isolated"}}));
  std::ofstream(d / "punct.json") << j.dump();
  msg = error_of([&] { load_tokenizer_file(d / "punct.json"); });
  EXPECT_NE(msg.find("pre_tokenizer Punctuation (DeBERTa's split_by_punct) is not supported"),
            std::string::npos)
      << msg;
}

}  // namespace
}  // namespace bertfit
