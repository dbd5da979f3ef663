// Tokenizer::decode against transformers 4.28.1's slow tokenizers: every id list of
// tests/fixtures/decode.json (made by tests/fixtures/make_decode_fixture.py) decodes to the
// reference's text for skip_special_tokens and clean_up_tokenization_spaces on and off, for
// WordPiece (bert-base-uncased's vocab.txt), byte-level BPE (../shared/data/roberta-bpe, whose
// tokenizer_config.json turns clean-up off) and SentencePiece (../shared/data/spm); plus the
// helpers' edge cases (Python's strip, errors="replace") and the refusal of an unknown id.
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/file.h"
#include "tokenizer/decode_util.h"
#include "tokenizer/tokenizer.h"

namespace bertfit {
namespace {

const std::string kShared = BERTFIT_SHARED_DIR;
using nlohmann::json;

json fixture() { return json::parse(read_file(BERTFIT_SOURCE_DIR "/tests/fixtures/decode.json")); }

// Checks every case of one family; returns how many id lists were checked.
int check_family(const Tokenizer& t, const json& family) {
  EXPECT_EQ(t.clean_up_tokenization_spaces(), family["default_clean_up"].get<bool>());
  int n = 0;
  for (const json& c : family["cases"]) {
    const auto ids = c["ids"].get<std::vector<std::int32_t>>();
    const auto want = c["text"].get<std::vector<std::string>>();
    const bool skip[] = {true, false, true, false};
    const bool clean[] = {true, true, false, false};
    for (int v = 0; v < 4; ++v) {
      EXPECT_EQ(t.decode(ids, skip[v], clean[v]), want[v])
          << c["ids"] << " skip " << skip[v] << " clean " << clean[v];
    }
    // Without an explicit clean_up, the tokenizer's own setting.
    const int own = t.clean_up_tokenization_spaces() ? 0 : 2;
    EXPECT_EQ(t.decode(ids, true), want[own]) << c["ids"];
    EXPECT_EQ(t.decode(ids, false), want[own + 1]) << c["ids"];
    ++n;
  }
  return n;
}

TEST(Decode, WordPieceEqualsBertTokenizer) {
  auto t = load_tokenizer_file(kShared + "/data/vocab/bert-base-uncased.txt");
  EXPECT_GE(check_family(*t, fixture()["bert"]), 40);
}

TEST(Decode, ByteLevelBpeEqualsRobertaTokenizer) {
  auto t = load_tokenizer(kShared + "/data/roberta-bpe");
  EXPECT_EQ(t->kind(), TokenizerKind::kByteLevelBpe);
  EXPECT_GE(check_family(*t, fixture()["roberta"]), 40);
}

TEST(Decode, SentencePieceEqualsXlmRobertaTokenizer) {
  auto t = load_tokenizer(kShared + "/data/spm");
  EXPECT_EQ(t->kind(), TokenizerKind::kSentencePiece);
  EXPECT_GE(check_family(*t, fixture()["xlmr"]), 40);
}

TEST(Decode, RefusesAnIdOutsideTheVocabulary) {
  auto t = load_tokenizer_file(kShared + "/data/vocab/bert-base-uncased.txt");
  const std::vector<std::int32_t> past = {101, t->max_id() + 1};
  try {
    t->decode(past, true);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token id 30522 is outside the vocabulary (0..30521)"),
              std::string::npos)
        << e.what();
  }
  const std::vector<std::int32_t> negative = {-1};
  EXPECT_THROW(t->decode(negative, false), Error);
  EXPECT_EQ(t->decode(std::vector<std::int32_t>{}, true), "");
}

TEST(Decode, PythonStripAndReplace) {
  using tokenizer_detail::python_strip;
  using tokenizer_detail::utf8_replace_invalid;
  EXPECT_EQ(python_strip(" \t\n a b \u3000\u00a0"), "a b");
  EXPECT_EQ(python_strip("\u2003"), "");
  EXPECT_EQ(python_strip("x"), "x");
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(utf8_replace_invalid("a\xE2\x82"
                                 "b"),
            "a" + fffd + "b");                               // a truncated sequence is one U+FFFD
  EXPECT_EQ(utf8_replace_invalid("\xC0\x80"), fffd + fffd);  // overlong: two
  EXPECT_EQ(utf8_replace_invalid("\xED\xA0\x80"), fffd + fffd + fffd);  // surrogate: three
  EXPECT_EQ(utf8_replace_invalid("\xF0\x9F\x98"), fffd);
  EXPECT_EQ(utf8_replace_invalid("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");
  EXPECT_EQ(utf8_replace_invalid("\xF4\x90\x80\x80"), fffd + fffd + fffd + fffd);
  EXPECT_EQ(utf8_replace_invalid("\x80\xFF"), fffd + fffd);
}

}  // namespace
}  // namespace bertfit
