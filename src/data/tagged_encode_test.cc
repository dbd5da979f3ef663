// Tests of encode_tagged and token-label batches with the bert-base-uncased WordPiece
// vocabulary: tags on first sub-tokens and -100 elsewhere, word ids, whole-word truncation (where
// HF would cut a word in the middle), words without sub-tokens, unlabeled data, label ids from
// label_names, unknown tags as FILE:LINE errors, the parallel run equal to the sequential one,
// and make_batch's (B,T) labels with -100 on padding.
#include <gtest/gtest.h>

#include "base/error.h"
#include "base/parallel.h"
#include "data/batch.h"
#include "tokenizer/wordpiece.h"

namespace bertfit {
namespace {

using Ids = std::vector<std::int32_t>;
constexpr std::int32_t X = -100;

const WordPieceTokenizer& bert() {
  static const WordPieceTokenizer tok = WordPieceTokenizer::from_vocab_file(
      std::string(BERTFIT_SHARED_DIR) + "/data/vocab/bert-base-uncased.txt");
  return tok;
}

LoadedTagged one_sentence(std::vector<std::string> words, std::vector<std::string> tags,
                          std::int64_t line = 1) {
  LoadedTagged d;
  d.path = "s.conll";
  d.one_word_per_line = true;
  d.sentences.push_back({std::move(words), std::move(tags), line});
  return d;
}

const std::vector<std::string> kLabels = {"B-LOC", "B-PER", "O"};

// "1996-08-30" is five word pieces: 2727 1011 5511 1011 2382 (as the golden bert-tokcls batch).
TEST(EncodeTagged, FirstSubTokenCarriesTheTag) {
  const auto e = encode_tagged(
      bert(), one_sentence({"LONDON", "1996-08-30", "Peter"}, {"B-LOC", "O", "B-PER"}), kLabels,
      64);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].ids, (Ids{101, 2414, 2727, 1011, 5511, 1011, 2382, 2848, 102}));
  EXPECT_EQ(e[0].token_labels, (Ids{X, 0, 2, X, X, X, X, 1, X}));
  EXPECT_EQ(e[0].word_ids, (Ids{-1, 0, 1, 1, 1, 1, 1, 2, -1}));
  EXPECT_EQ(e[0].type_ids, Ids(9, 0));
  EXPECT_EQ(e[0].truncated_words, 0);
  EXPECT_EQ(e[0].truncated_tokens, 0);
}

// Whole words only: with room for 5 sub-tokens HF keeps "london 1996 - 08 -" (cutting the date in
// the middle); we keep "london" and count one cut word of five sub-tokens.
TEST(EncodeTagged, TruncationKeepsWholeWords) {
  const LoadedTagged d = one_sentence({"LONDON", "1996-08-30", "Peter"}, {"B-LOC", "O", "B-PER"});
  const auto e = encode_tagged(bert(), d, kLabels, 7);
  EXPECT_EQ(e[0].ids, (Ids{101, 2414, 102}));
  EXPECT_EQ(e[0].token_labels, (Ids{X, 0, X}));
  EXPECT_EQ(e[0].word_ids, (Ids{-1, 0, -1}));
  EXPECT_EQ(e[0].truncated_words, 2);
  EXPECT_EQ(e[0].truncated_tokens, 6);
  // Exactly enough room keeps the date.
  const auto f = encode_tagged(bert(), d, kLabels, 8);
  EXPECT_EQ(f[0].ids, (Ids{101, 2414, 2727, 1011, 5511, 1011, 2382, 102}));
  EXPECT_EQ(f[0].truncated_words, 1);
  EXPECT_EQ(f[0].truncated_tokens, 1);
  // No room: the template alone, every word cut.
  const auto g = encode_tagged(bert(), d, kLabels, 2);
  EXPECT_EQ(g[0].ids, (Ids{101, 102}));
  EXPECT_EQ(g[0].token_labels, (Ids{X, X}));
  EXPECT_EQ(g[0].truncated_words, 3);
  EXPECT_THROW(encode_tagged(bert(), d, kLabels, 1), Error);
}

// A word of characters the tokenizer drops (a control character) has no position: its tag is
// not learnt, as run_ner (no token carries its word id); the next word still gets its tag.
TEST(EncodeTagged, WordWithoutSubTokens) {
  Ids none;
  bert().tokenize_word_into("\x01", none);
  ASSERT_TRUE(none.empty());
  const auto e = encode_tagged(
      bert(), one_sentence({"LONDON", "\x01", "Peter"}, {"B-LOC", "O", "B-PER"}), kLabels, 64);
  EXPECT_EQ(e[0].ids.size(), 4u);
  EXPECT_EQ(e[0].token_labels, (Ids{X, 0, 1, X}));
  EXPECT_EQ(e[0].word_ids, (Ids{-1, 0, 2, -1}));
}

TEST(EncodeTagged, UnlabeledMarksFirstSubTokens) {
  const auto e = encode_tagged(bert(), one_sentence({"LONDON", "1996-08-30"}, {}), {}, 64);
  EXPECT_EQ(e[0].token_labels, (Ids{X, -1, -1, X, X, X, X, X}));
}

TEST(EncodeTagged, LabelIdsFollowLabelNames) {
  const auto e = encode_tagged(bert(), one_sentence({"LONDON", "Peter"}, {"B-LOC", "B-PER"}),
                               {"B-PER", "I-PER", "B-LOC"}, 64);
  EXPECT_EQ(e[0].token_labels, (Ids{X, 2, 0, X}));
}

TEST(EncodeTagged, UnknownTagNamesTheWordsLine) {
  LoadedTagged d = one_sentence({"a", "b"}, {"O", "O"}, 3);
  d.sentences.push_back({{"x", "y", "z"}, {"O", "O", "I-MISC"}, 6});
  try {
    encode_tagged(bert(), d, kLabels, 64);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "s.conll:8: the tag 'I-MISC' of the word 'z' is not one of the labels: "
                 "'B-LOC', 'B-PER', 'O'");
  }
  d.one_word_per_line = false;  // JSONL: the sentence's line
  d.path = "s.jsonl";
  try {
    encode_tagged(bert(), d, kLabels, 64);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).substr(0, 10), "s.jsonl:6:");
  }
}

TEST(EncodeTagged, ParallelMatchesSequentialAndFirstErrorWins) {
  LoadedTagged d;
  d.path = "p.jsonl";
  for (int i = 0; i < 300; ++i) {  // enough sentences for several threads (64 per thread minimum)
    TaggedSentence s;
    for (int w = 0; w <= i % 9; ++w) {
      s.words.push_back(w % 2 ? "unaffable" : "word" + std::to_string(i * w));
      s.tags.push_back(w % 3 ? "O" : "B-PER");
    }
    s.line = i + 1;
    d.sentences.push_back(s);
  }
  set_num_threads(2);
  const auto all = encode_tagged(bert(), d, kLabels, 12);
  ASSERT_EQ(all.size(), 300u);
  for (int i = 0; i < 300; ++i) {
    LoadedTagged one;
    one.sentences = {d.sentences[i]};
    const auto e = encode_tagged(bert(), one, kLabels, 12);
    EXPECT_EQ(all[i].ids, e[0].ids) << i;
    EXPECT_EQ(all[i].token_labels, e[0].token_labels) << i;
    EXPECT_EQ(all[i].word_ids, e[0].word_ids) << i;
    EXPECT_EQ(all[i].truncated_words, e[0].truncated_words) << i;
    EXPECT_LE(all[i].ids.size(), 12u);
  }
  d.sentences[250].tags[0] = "BAD";
  d.sentences[100].tags[0] = "BAD";
  try {
    encode_tagged(bert(), d, kLabels, 12);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).substr(0, 12), "p.jsonl:101:");
  }
}

TEST(TokenLabelBatch, LabelsArePerTokenWithIgnoredPadding) {
  std::vector<EncodedExample> encoded(2);
  encoded[0].ids = {101, 7, 8, 102};
  encoded[0].token_labels = {X, 2, X, X};
  encoded[1].ids = {101, 9, 102};
  encoded[1].token_labels = {X, 0, X};
  for (auto& e : encoded) e.type_ids.assign(e.ids.size(), 0);
  BatchOptions options;
  options.token_labels = true;
  options.pad_to_multiple_of = 1;
  const std::vector<std::int64_t> order = {1, 0};
  const Batch b = make_batch(encoded, order, options);
  EXPECT_EQ(b.T, 4);
  EXPECT_EQ(b.labels, (std::vector<float>{X, 0, X, X, X, 2, X, X}));
  EXPECT_EQ(b.input_ids, (Ids{101, 9, 102, 0, 101, 7, 8, 102}));
}

}  // namespace
}  // namespace bertfit
