// Unit tests of the WordPiece tokenizer: text normalization edge cases (accents, CJK, control
// characters, invalid UTF-8, literal special tokens), greedy matching, pair encoding and
// truncation, and loader errors. Expected tokens come from transformers 4.28's BertTokenizer
// with bert-base-uncased.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "tokenizer/wordpiece.h"

namespace bertfit {
namespace {

using Ids = std::vector<std::int32_t>;
using Tokens = std::vector<std::string>;
const std::string kVocab = std::string(BERTFIT_SHARED_DIR) + "/data/vocab/bert-base-uncased.txt";

const WordPieceTokenizer& uncased() {
  static const WordPieceTokenizer tok = WordPieceTokenizer::from_vocab_file(kVocab);
  return tok;
}

Tokens tokens(const WordPieceTokenizer& tok, std::string_view text) {
  Tokens out;
  for (std::int32_t id : tok.tokenize_ids(text)) out.push_back(tok.token(id));
  return out;
}
Tokens tokens(std::string_view text) { return tokens(uncased(), text); }

// A fresh folder under the test temp dir, with the given files.
std::string make_dir(const std::string& name,
                     const std::vector<std::pair<std::string, std::string>>& files) {
  const std::string dir = ::testing::TempDir() + "/bertfit_tokenizer_" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const auto& [file, content] : files) std::ofstream(dir + "/" + file) << content;
  return dir;
}

const char* kTinyVocab =
    "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nun\n##aff\n##able\nunaff\nHello\n"
    "hello\n##lo\nhel\n,\n";

TEST(Tokenizer, SpecialIds) {
  EXPECT_EQ(uncased().vocab_size(), 30522);
  EXPECT_EQ(uncased().pad_id(), 0);
  EXPECT_EQ(uncased().unk_id(), 100);
  EXPECT_EQ(uncased().cls_id(), 101);
  EXPECT_EQ(uncased().sep_id(), 102);
}

TEST(Tokenizer, LowercaseAndAccents) {
  EXPECT_EQ(tokens("Héllo Wörld Ångström naïve café"),
            (Tokens{"hello", "world", "ang", "##strom", "naive", "cafe"}));
  // Python's str.lower(): U+0130 -> "i" U+0307 (then stripped); capital sigma is lowercased
  // one character at a time by HF, so it never becomes the final form.
  EXPECT_EQ(tokens("İstanbul ΣΟΦΙΑ"), (Tokens{"istanbul", "σ", "##ο", "##φ", "##ια"}));
  EXPECT_EQ(tokens("e\xCC\x81"), (Tokens{"e"}));                   // decomposed accent
  EXPECT_EQ(tokens("\xCC\x81"), Tokens{});                         // a lone combining mark vanishes
  EXPECT_EQ(tokens("ß K \xEF\xAC\x81"), (Tokens{"ß", "k", "ﬁ"}));  // no compatibility folding
}

TEST(Tokenizer, ChineseCharactersAreWords) {
  EXPECT_EQ(tokens("中文abc北京"), (Tokens{"中", "文", "abc", "北", "京"}));
}

TEST(Tokenizer, ControlCharactersAreDropped) {
  EXPECT_EQ(tokens("a\x01"
                   "b\x7f"
                   "c foo\tbar\nbaz\r"),
            (Tokens{"abc", "foo", "bar", "ba", "##z"}));
  EXPECT_EQ(tokens(std::string_view("he\0llo", 6)), (Tokens{"hello"}));
  EXPECT_EQ(tokens("he\xEF\xBF\xBDllo"), (Tokens{"hello"}));                              // U+FFFD
  EXPECT_EQ(tokens("\xEF\xBB\xBFhi\xE2\x80\x8Bthere"), (Tokens{"hit", "##her", "##e"}));  // Cf
  EXPECT_EQ(tokens("\xC2\xADsoft"), (Tokens{"soft"}));  // soft hyphen
}

TEST(Tokenizer, InvalidUtf8BytesVanish) {
  for (const char* bad : {"\xFF", "\x80", "\xC3", "\xC0\xAF", "\xE0\x80\xAF", "\xED\xA0\x80",
                          "\xF4\x90\x80\x80", "\xF8\x88\x80\x80\x80", "\xE2\x82"}) {
    EXPECT_EQ(tokens(std::string("he") + bad + "llo"), (Tokens{"hello"})) << bad;
    EXPECT_EQ(tokens(std::string("hello ") + bad), (Tokens{"hello"})) << bad;
  }
}

TEST(Tokenizer, EmptyAndWhitespace) {
  EXPECT_EQ(tokens(""), Tokens{});
  EXPECT_EQ(tokens(" \t\r\n"), Tokens{});
  // No-break space, ideographic space (Zs), line and paragraph separators (split by str.split).
  EXPECT_EQ(tokens("a\xC2\xA0"
                   "b\xE3\x80\x80"
                   "c\xE2\x80\xA8"
                   "d\xE2\x80\xA9"
                   "e"),
            (Tokens{"a", "b", "c", "d", "e"}));
}

TEST(Tokenizer, LongAndUnknownWords) {
  EXPECT_EQ(tokens(std::string(101, 'x')), (Tokens{"[UNK]"}));
  EXPECT_EQ(tokens(std::string(100, 'x')).size(), 50u);  // xx ##xx ... (no [UNK])
  std::string e101, e60;
  for (int i = 0; i < 101; ++i) e101 += "é";  // 202 bytes, 101 characters after normalization
  for (int i = 0; i < 60; ++i) e60 += "é";
  EXPECT_EQ(tokens(e101), (Tokens{"[UNK]"}));
  EXPECT_EQ(tokens(e60).size(), 30u);
  // A word that cannot be matched completely is one [UNK], not a partial match.
  EXPECT_EQ(tokens("abc☃ ☃"), (Tokens{"[UNK]", "[UNK]"}));
  EXPECT_EQ(tokens("Ａ"), (Tokens{"[UNK]"}));  // fullwidth: no compatibility folding
}

TEST(Tokenizer, Punctuation) {
  EXPECT_EQ(tokens("a$b^c`d~e|f+g<h=i>j"), (Tokens{"a", "$", "b", "^", "c", "`", "d", "~", "e", "|",
                                                   "f", "+", "g", "<", "h", "=", "i", ">", "j"}));
  EXPECT_EQ(tokens("“quoted”—dash"), (Tokens{"“", "quoted", "”", "—", "dash"}));
  EXPECT_EQ(tokens("don't stop..."), (Tokens{"don", "'", "t", "stop", ".", ".", "."}));
}

TEST(Tokenizer, LiteralSpecialTokensStayWhole) {
  EXPECT_EQ(uncased().tokenize_ids("hello [SEP] world[CLS]x [MASK] [UNK] [PAD]"),
            (Ids{7592, 102, 2088, 101, 1060, 103, 100, 0}));
  EXPECT_EQ(tokens("[cls] [[SEP]"), (Tokens{"[", "cl", "##s", "]", "[", "[SEP]"}));
}

TEST(Tokenizer, GreedyLongestMatchAndCasedVocab) {
  const std::string dir = make_dir("tiny", {{"vocab.txt", kTinyVocab}});
  const auto cased = WordPieceTokenizer::from_vocab_file(dir + "/vocab.txt", false);
  EXPECT_FALSE(cased.lowercase());
  EXPECT_EQ(tokens(cased, "unaffable"), (Tokens{"unaff", "##able"}));  // longest first
  EXPECT_EQ(tokens(cased, "Hello,hello hello"), (Tokens{"Hello", ",", "hello", "hello"}));
  EXPECT_EQ(tokens(cased, "Hel"), (Tokens{"[UNK]"}));
  EXPECT_EQ(tokens(cased, "hello"), (Tokens{"hello"}));
  const auto lower = WordPieceTokenizer::from_vocab_file(dir + "/vocab.txt", true);
  EXPECT_EQ(tokens(lower, "HELLO Hello"), (Tokens{"hello", "hello"}));
  // The id of a token listed twice is its last line, as in HF's vocab dict.
  const std::string dup = make_dir("dup", {{"vocab.txt", std::string(kTinyVocab) + "hello\n"}});
  const auto d = WordPieceTokenizer::from_vocab_file(dup + "/vocab.txt");
  EXPECT_EQ(d.tokenize_ids("hello"), (Ids{d.vocab_size() - 1}));
}

TEST(Tokenizer, CrlfVocabLines) {
  const std::string dir = make_dir("crlf", {{"vocab.txt", "[PAD]\r\n[UNK]\r[CLS]\n[SEP]\r\nab"}});
  const auto tok = WordPieceTokenizer::from_vocab_file(dir + "/vocab.txt");
  EXPECT_EQ(tok.vocab_size(), 5);
  EXPECT_EQ(tok.tokenize_ids("ab AB"), (Ids{4, 4}));
  EXPECT_EQ(tok.sep_id(), 3);
}

Ids iota_ids(int n, int base) {
  Ids v(n);
  for (int i = 0; i < n; ++i) v[i] = base + i;
  return v;
}

// Checks layout, type ids and mask of a pair encoding with la, lb tokens kept.
void expect_pair(const Encoding& e, int la, int lb) {
  ASSERT_EQ(e.input_ids.size(), static_cast<std::size_t>(la + lb + 3));
  Ids want = {101};
  for (int i = 0; i < la; ++i) want.push_back(1000 + i);
  want.push_back(102);
  for (int i = 0; i < lb; ++i) want.push_back(2000 + i);
  want.push_back(102);
  EXPECT_EQ(e.input_ids, want);
  Ids types(la + 2, 0);
  types.resize(la + lb + 3, 1);
  EXPECT_EQ(e.token_type_ids, types);
  EXPECT_EQ(e.attention_mask, Ids(la + lb + 3, 1));
}

TEST(Tokenizer, PairTruncationLongestFirst) {
  const auto& t = uncased();
  expect_pair(t.encode_ids(iota_ids(10, 1000), iota_ids(5, 2000), 12), 5, 4);  // a > b
  expect_pair(t.encode_ids(iota_ids(5, 1000), iota_ids(10, 2000), 12), 5, 4);  // a < b
  expect_pair(t.encode_ids(iota_ids(6, 1000), iota_ids(6, 2000), 12), 5, 4);   // equal
  expect_pair(t.encode_ids(iota_ids(6, 1000), iota_ids(6, 2000), 14), 6, 5);   // tie: b first
  expect_pair(t.encode_ids(iota_ids(3, 1000), iota_ids(2, 2000), 8), 3, 2);    // fits exactly
  expect_pair(t.encode_ids(iota_ids(7, 1000), iota_ids(1, 2000), 6), 2, 1);
  expect_pair(t.encode_ids(iota_ids(4, 1000), iota_ids(4, 2000), 3), 0, 0);
  expect_pair(t.encode_ids({}, Ids{}, 3), 0, 0);
}

TEST(Tokenizer, SingleEncodingAndSmallMaxLen) {
  const auto& t = uncased();
  const Encoding e = t.encode("Hello, world!", std::nullopt, 128);
  EXPECT_EQ(e.input_ids, (Ids{101, 7592, 1010, 2088, 999, 102}));
  EXPECT_EQ(e.token_type_ids, Ids(6, 0));
  EXPECT_EQ(e.attention_mask, Ids(6, 1));
  EXPECT_EQ(t.encode("Hello, world!", std::nullopt, 4).input_ids, (Ids{101, 7592, 1010, 102}));
  EXPECT_EQ(t.encode("Hello, world!", std::nullopt, 2).input_ids, (Ids{101, 102}));
  EXPECT_EQ(t.encode("", std::nullopt, 2).input_ids, (Ids{101, 102}));
  EXPECT_THROW(t.encode("Hello", std::nullopt, 1), Error);
  EXPECT_THROW(t.encode("Hello", std::string_view("world"), 2), Error);
  EXPECT_THROW(t.encode_ids({}, Ids{}, 0), Error);
  const Encoding p = t.encode("Hello", std::string_view("world"), 3);
  EXPECT_EQ(p.input_ids, (Ids{101, 102, 102}));
  EXPECT_EQ(p.token_type_ids, (Ids{0, 0, 1}));
}

TEST(Tokenizer, TruncatedTokensCountsWhatWasCut) {
  const auto& t = uncased();
  EXPECT_EQ(t.encode("Hello, world!", std::nullopt, 128).truncated_tokens, 0);  // 4 tokens
  EXPECT_EQ(t.encode("Hello, world!", std::nullopt, 4).truncated_tokens, 2);
  EXPECT_EQ(t.encode("Hello, world!", std::nullopt, 2).truncated_tokens, 4);
  EXPECT_EQ(t.encode_ids(iota_ids(7, 1000), iota_ids(4, 2000), 3 + 6).truncated_tokens, 5);
  EXPECT_EQ(t.encode_ids(iota_ids(3, 1000), iota_ids(4, 2000), 3 + 7).truncated_tokens, 0);
}

void expect_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no Error thrown; expected one mentioning " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Tokenizer, LoaderErrorsNameTheFile) {
  expect_error([] { WordPieceTokenizer::from_vocab_file("/nonexistent/vocab.txt"); },
               "/nonexistent/vocab.txt");
  const std::string dir =
      make_dir("errors", {{"empty.txt", ""},
                          {"nocls.txt", "[PAD]\n[UNK]\n[SEP]\n"},
                          {"badutf8.txt", "[PAD]\n\xFF\n"},
                          {"novocab.json", R"({"model": {"unk_token": "[UNK]"}})"},
                          {"bad.json", R"({"model": {"vocab": )"},
                          {"badid.json", R"({"model": {"vocab": {"a": "x"}}})"}});
  expect_error([&] { WordPieceTokenizer::from_vocab_file(dir + "/empty.txt"); }, "empty.txt");
  expect_error([&] { WordPieceTokenizer::from_vocab_file(dir + "/nocls.txt"); }, "[CLS]");
  expect_error([&] { WordPieceTokenizer::from_vocab_file(dir + "/badutf8.txt"); }, "badutf8.txt:2");
  expect_error([&] { WordPieceTokenizer::from_tokenizer_json(dir + "/novocab.json"); },
               "novocab.json: model.vocab");
  expect_error([&] { WordPieceTokenizer::from_tokenizer_json(dir + "/bad.json"); }, "bad.json");
  expect_error([&] { WordPieceTokenizer::from_tokenizer_json(dir + "/badid.json"); }, "badid.json");
  expect_error([&] { WordPieceTokenizer::from_model_dir(dir); }, "neither vocab.txt");
  expect_error([&] { WordPieceTokenizer::from_model_dir(dir + "/missing"); }, "missing");
}

TEST(Tokenizer, FromModelDir) {
  const std::string cased = make_dir(
      "model_cased",
      {{"vocab.txt", kTinyVocab}, {"tokenizer_config.json", R"({"do_lower_case": false})"}});
  EXPECT_FALSE(WordPieceTokenizer::from_model_dir(cased).lowercase());
  const std::string plain = make_dir("model_plain", {{"vocab.txt", kTinyVocab}});
  EXPECT_TRUE(WordPieceTokenizer::from_model_dir(plain).lowercase());
  const std::string bad =
      make_dir("model_bad", {{"vocab.txt", kTinyVocab}, {"tokenizer_config.json", "{"}});
  expect_error([&] { WordPieceTokenizer::from_model_dir(bad); }, "tokenizer_config.json");
  std::ifstream src(std::string(BERTFIT_SHARED_DIR) +
                    "/data/vocab/bert-base-uncased-tokenizer.json");
  const std::string json((std::istreambuf_iterator<char>(src)), std::istreambuf_iterator<char>());
  const std::string fast = make_dir("model_json", {{"tokenizer.json", json}});
  const auto tok = WordPieceTokenizer::from_model_dir(fast);
  EXPECT_EQ(tok.tokenize_ids("Héllo, [SEP]"), (Ids{7592, 1010, 102}));
}

TEST(Tokenizer, WordPieceOffsets) {
  const std::string text = "Hello, unaffable\tHéllo [SEP]x";
  Ids ids;
  std::vector<TokenOffset> offsets;
  uncased().tokenize_into(text, ids, &offsets);
  EXPECT_EQ(ids, uncased().tokenize_ids(text));
  // hello , una ##ffa ##ble hello(non-ASCII word: the whole word) [SEP] x
  EXPECT_EQ(offsets,
            (std::vector<TokenOffset>{
                {0, 5}, {5, 6}, {7, 10}, {10, 13}, {13, 16}, {17, 23}, {24, 29}, {29, 30}}));
  // Each piece of a non-ASCII word spans its own source bytes, as Hugging Face's fast tokenizer
  // aligns them (its character offsets, converted to bytes here): a stripped accent inside a
  // piece is in it, a dropped control character between pieces in neither; the jamo of one
  // Hangul syllable share its bytes.
  const std::string words = "the Saldaña to Zürichsee, e\u0301x\u0007y 한국어 İstanbul";
  ids.clear();
  offsets.clear();
  uncased().tokenize_into(words, ids, &offsets);
  EXPECT_EQ(offsets, (std::vector<TokenOffset>{{0, 3},
                                               {4, 7},
                                               {7, 12},
                                               {13, 15},
                                               {16, 23},
                                               {23, 26},
                                               {26, 27},
                                               {28, 32},
                                               {33, 34},
                                               {35, 38},
                                               {35, 38},
                                               {35, 38},
                                               {38, 41},
                                               {38, 41},
                                               {38, 41},
                                               {41, 44},
                                               {41, 44},
                                               {45, 54}}));
  const Encoding e = uncased().encode("Hi", std::string_view("there"), 16, true);
  EXPECT_EQ(e.offsets, (std::vector<TokenOffset>{{0, 0}, {0, 2}, {0, 0}, {0, 5}, {0, 0}}));
}

}  // namespace
}  // namespace bertfit
