// Tests of the tagged-data readers: CoNLL (last column is the tag, blank lines and -DOCSTART-
// end sentences, lines of the first word), JSONL (string and integer tags, unlabeled rows), the
// sorted tag list, and every user error as one message naming FILE:LINE; plus the real
// CoNLL-2003 validation file (../shared/data/conll2003/valid.txt).
#include "data/tagged.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/error.h"

namespace bertfit {
namespace {

using Strings = std::vector<std::string>;

// The message of the Error that fn throws ("" when it throws none).
template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Conll, SentencesWordsTagsAndLines) {
  const std::string text =
      "\xEF\xBB\xBF-DOCSTART- -X- -X- O\n"
      "\n"
      "EU NNP B-NP B-ORG\n"
      "rejects VBZ B-VP O \r\n"
      "German\tJJ\tB-NP\tB-MISC\n"
      "\n"
      "   \n"
      "Peter B-PER\n"
      "-DOCSTART- O\n"  // ends the sentence before it, as the Hub's conll2003 loader does
      "Blackburn B-PER\n"
      "\n\n";
  const LoadedTagged d = parse_conll(text, "x.conll");
  EXPECT_EQ(d.path, "x.conll");
  EXPECT_TRUE(d.one_word_per_line);
  ASSERT_EQ(d.sentences.size(), 3u);
  EXPECT_EQ(d.sentences[0].words, (Strings{"EU", "rejects", "German"}));
  EXPECT_EQ(d.sentences[0].tags, (Strings{"B-ORG", "O", "B-MISC"}));
  EXPECT_EQ(d.sentences[0].line, 3);
  EXPECT_EQ(d.sentences[1].words, (Strings{"Peter"}));
  EXPECT_EQ(d.sentences[1].line, 8);
  EXPECT_EQ(d.sentences[2].words, (Strings{"Blackburn"}));
  EXPECT_EQ(d.sentences[2].line, 10);
  EXPECT_EQ(d.tag_names, (Strings{"B-MISC", "B-ORG", "B-PER", "O"}));
  EXPECT_EQ(count_words(d), 5);
}

TEST(Conll, NoFinalNewlineAndUnlabeled) {
  const LoadedTagged d = parse_conll("a O\nb I-X", "y.conll");
  ASSERT_EQ(d.sentences.size(), 1u);
  EXPECT_EQ(d.sentences[0].tags, (Strings{"O", "I-X"}));
  // Unlabeled: the first column is the word; a single column is fine.
  const LoadedTagged u = parse_conll("a O\nb\n\nc x y\n", "y.conll", /*with_tags=*/false);
  ASSERT_EQ(u.sentences.size(), 2u);
  EXPECT_EQ(u.sentences[0].words, (Strings{"a", "b"}));
  EXPECT_TRUE(u.sentences[0].tags.empty());
  EXPECT_EQ(u.sentences[1].words, (Strings{"c"}));
  EXPECT_TRUE(u.tag_names.empty());
}

TEST(Conll, TagsSortBytewiseAsPython) {
  const LoadedTagged d = parse_conll("a O\nb I-PER\nc B-PER\nd b-x\ne \xC3\xA9\n", "z.conll");
  EXPECT_EQ(d.tag_names, (Strings{"B-PER", "I-PER", "O", "b-x", "\xC3\xA9"}));
}

TEST(Conll, UserErrorsNameFileAndLine) {
  EXPECT_EQ(error_of([] { parse_conll("a O\nb\n", "f.conll"); }),
            "f.conll:2: the word 'b' has no tag (expected the word, then its tag in the last "
            "column, separated by spaces or TABs; a blank line between sentences)");
  EXPECT_EQ(error_of([] { parse_conll("a O\n\nb \xFF O\n", "f.conll"); }),
            "f.conll:3: not valid UTF-8 (byte 3 of the line); re-encode the file as UTF-8");
  EXPECT_EQ(error_of([] { parse_conll("", "e.conll"); }),
            "e.conll has no sentences (it is empty or holds only blank and -DOCSTART- lines)");
  EXPECT_EQ(error_of([] { parse_conll("-DOCSTART- O\n\n\n", "e.conll"); }),
            "e.conll has no sentences (it is empty or holds only blank and -DOCSTART- lines)");
  EXPECT_EQ(error_of([] { read_conll("/nonexistent/none.conll"); }).find("/nonexistent/none.conll"),
            0u);
}

TEST(Conll, PathsRecognized) {
  EXPECT_TRUE(is_conll_path("data/train.conll"));
  EXPECT_FALSE(is_conll_path("data/train.txt"));  // CoNLL-2003's own files need --format conll
  EXPECT_FALSE(is_conll_path("conll"));
  EXPECT_FALSE(is_conll_path("x.jsonl"));
}

TEST(TaggedJsonl, StringAndIntegerTags) {
  const std::string text =
      "{\"tokens\": [\"EU\", \"rejects\", \"it\"], \"ner_tags\": [3, 0, 0], \"id\": \"0\"}\n"
      "\n"
      "{\"tokens\": [\"Peter\", \"Blackburn\"], \"ner_tags\": [\"B-PER\", 2]}\n"
      "{\"tokens\": [], \"ner_tags\": []}\r\n";
  const Strings id2label = {"O", "B-PER", "I-PER", "B-ORG"};
  const LoadedTagged d = parse_tagged_jsonl(text, "t.jsonl", "tokens", "ner_tags", id2label);
  EXPECT_FALSE(d.one_word_per_line);
  ASSERT_EQ(d.sentences.size(), 3u);  // the empty sentence is kept: rows match input lines
  EXPECT_EQ(d.sentences[0].words, (Strings{"EU", "rejects", "it"}));
  EXPECT_EQ(d.sentences[0].tags, (Strings{"B-ORG", "O", "O"}));
  EXPECT_EQ(d.sentences[0].line, 1);
  EXPECT_EQ(d.sentences[1].tags, (Strings{"B-PER", "I-PER"}));
  EXPECT_EQ(d.sentences[1].line, 3);
  EXPECT_TRUE(d.sentences[2].words.empty());
  EXPECT_EQ(d.sentences[2].line, 4);
  EXPECT_EQ(d.tag_names, (Strings{"B-ORG", "B-PER", "I-PER", "O"}));
}

TEST(TaggedJsonl, UnlabeledReadsWordsOnly) {
  const LoadedTagged d =
      parse_tagged_jsonl("{\"words\": [\"a\", \"b\"]}\n", "u.jsonl", "words", "", {});
  ASSERT_EQ(d.sentences.size(), 1u);
  EXPECT_EQ(d.sentences[0].words, (Strings{"a", "b"}));
  EXPECT_TRUE(d.sentences[0].tags.empty());
}

TEST(TaggedJsonl, UserErrorsNameFileAndLine) {
  const Strings names = {"O", "B-X"};
  auto parse = [&](const std::string& text, const Strings& id2label) {
    return error_of([&] { parse_tagged_jsonl(text, "j.jsonl", "tokens", "tags", id2label); });
  };
  EXPECT_EQ(parse("{\"tokens\": [\"a\"], \"tags\": [\"O\"]}\n{\"tokens\": [\"a\", \"b\"], "
                  "\"tags\": [\"O\"]}\n",
                  {}),
            "j.jsonl:2: 'tokens' holds 2 word(s) but 'tags' holds 1 tag(s); every word needs "
            "one tag");
  EXPECT_EQ(parse("{\"tokens\": [\"a\"], \"labels\": [\"O\"]}\n", {}),
            "j.jsonl:1: no key 'tags' (keys on this line: 'labels', 'tokens')");
  EXPECT_EQ(parse("{\"words\": [\"a\"], \"tags\": [\"O\"]}\n", {}),
            "j.jsonl:1: no key 'tokens' (keys on this line: 'tags', 'words')");
  EXPECT_EQ(parse("{\"tokens\": \"a b\", \"tags\": [\"O\"]}\n", {}),
            "j.jsonl:1: key 'tokens' holds a JSON string; expected a list");
  EXPECT_EQ(parse("{\"tokens\": [\"a\", 5], \"tags\": [\"O\", \"O\"]}\n", {}),
            "j.jsonl:1: word 2 of 'tokens' is a JSON number; expected strings");
  EXPECT_EQ(parse("\n{\"tokens\": [\"a\"], \"tags\": [1]}\n", {}),
            "j.jsonl:2: tag 1 of 'tags' is the integer 1, but there is no id2label to name it "
            "(the model's config.json has no label names); write the tags as strings");
  EXPECT_EQ(parse("{\"tokens\": [\"a\", \"b\"], \"tags\": [1, 2]}\n", names),
            "j.jsonl:1: tag 2 of 'tags' is the integer 2, outside the model's id2label [0, 2)");
  EXPECT_EQ(parse("{\"tokens\": [\"a\"], \"tags\": [-1]}\n", names),
            "j.jsonl:1: tag 1 of 'tags' is the integer -1, outside the model's id2label [0, 2)");
  EXPECT_EQ(parse("{\"tokens\": [\"a\"], \"tags\": [1.5]}\n", names),
            "j.jsonl:1: tag 1 of 'tags' is a JSON number; expected a string or an integer id");
  EXPECT_EQ(parse("{\"tokens\": [\"a\"], \"tags\": [\"\"]}\n", names),
            "j.jsonl:1: tag 1 of 'tags' is an empty string");
  EXPECT_EQ(parse("{\"tokens\": [\"a\"], \"tags\": [\"O\"]\n", names), "j.jsonl:1: invalid JSON");
  EXPECT_EQ(parse("[1, 2]\n", names), "j.jsonl:1: expected a JSON object, got array");
  EXPECT_EQ(parse("{\"tokens\": [\"\xC3\"], \"tags\": [\"O\"]}\n", names),
            "j.jsonl:1: not valid UTF-8 (byte 14 of the line); re-encode the file as UTF-8");
  EXPECT_EQ(parse("\n  \n", names),
            "j.jsonl has no sentences (it is empty or holds only blank lines)");
}

TEST(TaggedFiles, ReadFromDisk) {
  const auto dir = std::filesystem::temp_directory_path() / "bertfit_tagged_test";
  std::filesystem::create_directories(dir);
  const std::string conll = (dir / "a.conll").string(), jsonl = (dir / "a.jsonl").string();
  std::ofstream(conll) << "x O\ny B-A\n";
  std::ofstream(jsonl) << "{\"t\": [\"x\"], \"g\": [\"O\"]}\n";
  EXPECT_EQ(read_conll(conll).sentences.at(0).tags, (Strings{"O", "B-A"}));
  EXPECT_EQ(read_conll(conll).path, conll);
  EXPECT_EQ(read_tagged_jsonl(jsonl, "t", "g", {}).sentences.at(0).words, (Strings{"x"}));
  std::filesystem::remove_all(dir);
}

// tests/fixtures/tagged: the same sentences as CoNLL, JSONL with string tags and JSONL with the
// Hub's integer ids read alike.
TEST(TaggedFiles, FixturesReadAlike) {
  const std::string dir = std::string(BERTFIT_SOURCE_DIR) + "/tests/fixtures/tagged/";
  const Strings id2label = {"B-LOC",  "B-MISC", "B-ORG", "B-PER", "I-LOC",
                            "I-MISC", "I-ORG",  "I-PER", "O"};
  const LoadedTagged conll = read_conll(dir + "ner_tiny.conll");
  const LoadedTagged strings = read_tagged_jsonl(dir + "ner_tiny.jsonl", "tokens", "tags", {});
  const LoadedTagged ids =
      read_tagged_jsonl(dir + "ner_tiny_ids.jsonl", "tokens", "ner_tags", id2label);
  ASSERT_EQ(conll.sentences.size(), 4u);
  EXPECT_EQ(count_words(conll), 20);
  EXPECT_EQ(conll.sentences[0].words[1], "M\xC3\xBCller");
  EXPECT_EQ(conll.sentences[3].line, 25);
  for (const LoadedTagged* other : {&strings, &ids}) {
    ASSERT_EQ(other->sentences.size(), conll.sentences.size()) << other->path;
    for (std::size_t i = 0; i < conll.sentences.size(); ++i) {
      EXPECT_EQ(other->sentences[i].words, conll.sentences[i].words) << other->path << " " << i;
      EXPECT_EQ(other->sentences[i].tags, conll.sentences[i].tags) << other->path << " " << i;
    }
    EXPECT_EQ(other->tag_names, conll.tag_names);
  }
  // The data's tags are a subset of the model's (no I-LOC), as with the golden tokcls batches.
  EXPECT_EQ(conll.tag_names,
            (Strings{"B-LOC", "B-MISC", "B-ORG", "B-PER", "I-MISC", "I-ORG", "I-PER", "O"}));
}

// The real CoNLL-2003 validation file: 3,250 sentences of 51,362 words (216 -DOCSTART- lines
// skipped), as the Hub's conll2003 validation split and run_ner count them.
TEST(Conll, Conll2003Validation) {
  const LoadedTagged d = read_conll(std::string(BERTFIT_SHARED_DIR) + "/data/conll2003/valid.txt");
  EXPECT_EQ(d.sentences.size(), 3250u);
  EXPECT_EQ(count_words(d), 51362);
  EXPECT_EQ(d.tag_names, (Strings{"B-LOC", "B-MISC", "B-ORG", "B-PER", "I-LOC", "I-MISC", "I-ORG",
                                  "I-PER", "O"}));
  for (const TaggedSentence& s : d.sentences) {
    ASSERT_EQ(s.words.size(), s.tags.size());
    EXPECT_NE(s.words.front(), "-DOCSTART-");
  }
  EXPECT_EQ(d.sentences[0].words.front(), "CRICKET");
  EXPECT_EQ(d.sentences[0].line, 3);
  EXPECT_EQ(d.sentences[1].words, (Strings{"LONDON", "1996-08-30"}));
  EXPECT_EQ(d.sentences[1].tags, (Strings{"B-LOC", "O"}));
  EXPECT_EQ(d.sentences.back().words, (Strings{"--", "Dhaka", "Newsroom", "880-2-506363"}));
  EXPECT_EQ(d.sentences.back().tags, (Strings{"O", "B-ORG", "I-ORG", "O"}));
}

// skip_malformed: a CoNLL sentence with a bad line is left out up to its blank line, a JSONL
// line alone; rows count the skipped ones, reasons lose the FILE:LINE prefix.
TEST(TaggedFiles, SkipMalformedKeepsRowsInFileOrder) {
  LoadedTagged c = parse_conll("a O\n\nb\nc O\nd O\n\n-DOCSTART- -X-\ne B-X\n", "f.conll",
                               /*with_tags=*/true, /*skip_malformed=*/true);
  ASSERT_EQ(c.sentences.size(), 2u);
  EXPECT_EQ(c.sentences[0].row, 0);
  EXPECT_EQ(c.sentences[1].row, 2);
  EXPECT_EQ(c.sentences[1].words, std::vector<std::string>{"e"});
  ASSERT_EQ(c.skipped.size(), 1u);
  EXPECT_EQ(c.skipped[0].row, 1);
  EXPECT_EQ(c.skipped[0].line, 3);
  EXPECT_EQ(c.skipped[0].reason.rfind("the word 'b' has no tag", 0), 0u) << c.skipped[0].reason;
  EXPECT_THROW(parse_conll("a O\n\nb\n", "f.conll"), Error);
  EXPECT_THROW(parse_conll("b\n", "f.conll", true, true), Error);  // no good sentence
  LoadedTagged j = parse_tagged_jsonl("{\"w\": [\"a\"]}\n[1]\n\n{\"w\": [\"b\"]}\n", "f.jsonl", "w",
                                      "", {}, /*skip_malformed=*/true);
  ASSERT_EQ(j.sentences.size(), 2u);
  EXPECT_EQ(j.sentences[1].row, 2);
  ASSERT_EQ(j.skipped.size(), 1u);
  EXPECT_EQ(j.skipped[0].row, 1);
  EXPECT_EQ(j.skipped[0].line, 2);
  EXPECT_EQ(j.skipped[0].reason, "expected a JSON object, got array");
}

}  // namespace
}  // namespace bertfit
