// Tests of the seqeval metrics: tag_entities on hand-worked IOB1 / IOB2 / BIOES / malformed
// sentences, then everything against the real seqeval 1.2.2 (tests/fixtures/seqeval.json, made
// by tests/fixtures/make_seqeval_fixture.py): hand-written edge cases and CoNLL-2003 valid with
// perturbed predictions.
#include "data/seqeval.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/file.h"

namespace bertfit {
namespace {

using Tags = std::vector<std::string>;
using Entities = std::vector<TagEntity>;

TEST(TagEntities, Iob2) {
  EXPECT_EQ(tag_entities(Tags{"B-PER", "I-PER", "O", "B-LOC"}),
            (Entities{{"PER", 0, 2}, {"LOC", 3, 4}}));
  // B after B (or I) of the same type starts a new entity.
  EXPECT_EQ(tag_entities(Tags{"B-ORG", "B-ORG", "I-ORG", "B-ORG"}),
            (Entities{{"ORG", 0, 1}, {"ORG", 1, 3}, {"ORG", 3, 4}}));
  EXPECT_EQ(tag_entities(Tags{"O", "O"}), Entities{});
  EXPECT_EQ(tag_entities(Tags{}), Entities{});
}

TEST(TagEntities, Iob1AndIAfterO) {
  // IOB1: I- starts an entity after O; B- only splits two adjacent entities of one type.
  EXPECT_EQ(tag_entities(Tags{"I-PER", "I-PER", "B-PER", "O", "I-LOC"}),
            (Entities{{"PER", 0, 2}, {"PER", 2, 3}, {"LOC", 4, 5}}));
  EXPECT_EQ(tag_entities(Tags{"O", "I-MISC", "I-MISC"}), (Entities{{"MISC", 1, 3}}));
}

TEST(TagEntities, TypeChangeInsideARunSplitsIt) {
  EXPECT_EQ(tag_entities(Tags{"B-PER", "I-LOC", "I-LOC", "O"}),
            (Entities{{"PER", 0, 1}, {"LOC", 1, 3}}));
  EXPECT_EQ(tag_entities(Tags{"I-PER", "I-ORG"}), (Entities{{"PER", 0, 1}, {"ORG", 1, 2}}));
}

TEST(TagEntities, EntityAtSentenceEnd) {
  EXPECT_EQ(tag_entities(Tags{"O", "B-LOC"}), (Entities{{"LOC", 1, 2}}));
  EXPECT_EQ(tag_entities(Tags{"O", "B-LOC", "I-LOC"}), (Entities{{"LOC", 1, 3}}));
  EXPECT_EQ(tag_entities(Tags{"I-ORG"}), (Entities{{"ORG", 0, 1}}));
}

TEST(TagEntities, Bioes) {
  EXPECT_EQ(tag_entities(Tags{"S-PER", "B-LOC", "I-LOC", "E-LOC", "O", "B-ORG", "E-ORG", "S-ORG"}),
            (Entities{{"PER", 0, 1}, {"LOC", 1, 4}, {"ORG", 5, 7}, {"ORG", 7, 8}}));
  // E and S always end a chunk; E after O starts one; I after E starts one.
  EXPECT_EQ(tag_entities(Tags{"E-PER", "E-PER", "O", "I-LOC", "E-LOC", "I-LOC"}),
            (Entities{{"PER", 0, 1}, {"PER", 1, 2}, {"LOC", 3, 5}, {"LOC", 5, 6}}));
  // B then S: the B chunk ends.
  EXPECT_EQ(tag_entities(Tags{"B-PER", "S-PER"}), (Entities{{"PER", 0, 1}, {"PER", 1, 2}}));
}

TEST(TagEntities, BareAndMalformedTags) {
  // No type: "_".
  EXPECT_EQ(tag_entities(Tags{"B", "I", "O", "S", "I-"}),
            (Entities{{"_", 0, 2}, {"_", 3, 4}, {"_", 4, 5}}));
  // The type is what follows the first '-' after the first character.
  EXPECT_EQ(tag_entities(Tags{"B-PER-X", "I-PER-X", "PER"}),
            (Entities{{"PER-X", 0, 2}, {"ER", 2, 3}}));
  // A started chunk that never ends is dropped: '.' does not end on O.
  EXPECT_EQ(tag_entities(Tags{"B-PER", ".-PER", "O"}), Entities{});
  // An end without a new start reuses the last begin (here 0, stale): seqeval's quirk.
  EXPECT_EQ(tag_entities(Tags{"B-PER", "O", "X", "I-PER"}),
            (Entities{{"PER", 0, 1}, {"_", 0, 3}, {"PER", 3, 4}}));
  // The first character is a character, not a byte: "Б" alone has no type.
  EXPECT_EQ(tag_entities(Tags{"Б-PER", "Б", "B-Б"}),
            (Entities{{"PER", 0, 1}, {"_", 1, 2}, {"Б", 2, 3}}));
  EXPECT_THROW(tag_entities(Tags{"O", ""}), Error);
}

TEST(SeqevalScores, ByHand) {
  // Truth PER[0,2) LOC[3,4) | ORG[0,1); predicted PER[0,2) LOC[2,4) | MISC[0,1).
  const std::vector<Tags> truth = {{"B-PER", "I-PER", "O", "B-LOC"}, {"B-ORG", "O"}};
  const std::vector<Tags> predicted = {{"B-PER", "I-PER", "B-LOC", "I-LOC"}, {"B-MISC", "O"}};
  const SeqevalScores s = seqeval_scores(truth, predicted);
  EXPECT_DOUBLE_EQ(s.precision, 1.0 / 3.0);  // 1 of 3 predicted matches
  EXPECT_DOUBLE_EQ(s.recall, 1.0 / 3.0);     // 1 of 3 true is found
  EXPECT_DOUBLE_EQ(s.f1, 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(s.accuracy, 3.0 / 6.0);  // tokens 0, 1, 5 agree
  ASSERT_EQ(s.types.size(), 4u);
  const char* names[] = {"LOC", "MISC", "ORG", "PER"};
  const double f1s[] = {0, 0, 0, 1};
  const std::int64_t supports[] = {1, 0, 1, 1};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(s.types[i].type, names[i]);
    EXPECT_EQ(s.types[i].f1, f1s[i]) << names[i];
    EXPECT_EQ(s.types[i].support, supports[i]) << names[i];
  }
}

TEST(SeqevalScores, NoEntityCrossesSentences) {
  // Truth LOC[1,3) | LOC[0,2); one sentence's run would be LOC[1,5).
  const std::vector<Tags> truth = {{"O", "B-LOC", "I-LOC"}, {"I-LOC", "I-LOC"}};
  EXPECT_EQ(seqeval_scores(truth, truth).f1, 1.0);
  const std::vector<Tags> joined = {{"O", "B-LOC", "I-LOC", "I-LOC", "I-LOC"}};
  EXPECT_EQ(tag_entities(joined[0]), (Entities{{"LOC", 1, 5}}));
}

TEST(SeqevalScores, DegenerateInputs) {
  const std::vector<Tags> outside = {{"O", "O"}}, person = {{"B-PER", "O"}};
  SeqevalScores s = seqeval_scores(outside, outside);
  EXPECT_EQ(s.f1, 0.0);
  EXPECT_EQ(s.accuracy, 1.0);
  EXPECT_TRUE(s.types.empty());
  s = seqeval_scores(person, outside);  // nothing predicted
  EXPECT_EQ(s.precision, 0.0);
  EXPECT_EQ(s.recall, 0.0);
  ASSERT_EQ(s.types.size(), 1u);
  EXPECT_EQ(s.types[0].support, 1);
  EXPECT_TRUE(std::isnan(seqeval_scores({}, {}).accuracy));
}

TEST(SeqevalScores, MismatchedInputsNameTheSentence) {
  const std::vector<Tags> a = {{"O"}, {"O", "B-PER"}}, b = {{"O"}, {"O"}}, c = {{"O"}};
  try {
    seqeval_scores(a, b);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "seqeval: sentence 1 has 2 true tags but 1 predicted ones");
  }
  EXPECT_THROW(seqeval_scores(a, c), Error);
  const std::vector<Tags> empty_tag = {{"O"}, {"O", ""}};
  try {
    seqeval_scores(a, empty_tag);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "seqeval: sentence 1 has an empty predicted tag at token 1");
  }
}

// ---- Against seqeval 1.2.2 (the fixture).

nlohmann::json load_fixture() {
  return nlohmann::json::parse(
      read_file(std::string(BERTFIT_SOURCE_DIR) + "/tests/fixtures/seqeval.json"));
}

// The fixture's sentences: one character per tag (an index into `alphabet` -> vocab), sentences
// separated by spaces.
std::vector<Tags> decode(const nlohmann::json& c, const std::string& key) {
  const std::string alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  const auto vocab = c["vocab"].get<std::vector<std::string>>();
  std::vector<Tags> sentences(1);
  for (char ch : c[key].get<std::string>()) {
    if (ch == ' ') {
      sentences.emplace_back();
    } else {
      const std::size_t index = alphabet.find(ch);
      EXPECT_LT(index, vocab.size());
      sentences.back().push_back(vocab.at(index));
    }
  }
  EXPECT_EQ(sentences.size(), c["sentences"].get<std::size_t>());
  return sentences;
}

// seqeval's numbers come from the same integer counts through the same double operations, so
// they agree exactly; 1e-12 leaves room for nothing but a different formula.
constexpr double kTol = 1e-12;

void expect_scores(const SeqevalScores& got, const nlohmann::json& want) {
  EXPECT_NEAR(got.precision, want["overall_precision"].get<double>(), kTol);
  EXPECT_NEAR(got.recall, want["overall_recall"].get<double>(), kTol);
  EXPECT_NEAR(got.f1, want["overall_f1"].get<double>(), kTol);
  EXPECT_NEAR(got.accuracy, want["overall_accuracy"].get<double>(), kTol);
  const nlohmann::json& types = want["types"];
  ASSERT_EQ(got.types.size(), types.size());
  for (std::size_t i = 0; i < types.size(); ++i) {
    SCOPED_TRACE(types[i]["type"].get<std::string>());
    EXPECT_EQ(got.types[i].type, types[i]["type"].get<std::string>());
    EXPECT_NEAR(got.types[i].precision, types[i]["precision"].get<double>(), kTol);
    EXPECT_NEAR(got.types[i].recall, types[i]["recall"].get<double>(), kTol);
    EXPECT_NEAR(got.types[i].f1, types[i]["f1"].get<double>(), kTol);
    EXPECT_EQ(got.types[i].support, types[i]["number"].get<std::int64_t>());
  }
}

TEST(SeqevalOracle, EdgeCasesMatchSeqeval) {
  const nlohmann::json f = load_fixture();
  ASSERT_EQ(f["seqeval"], "v1.2.2");
  int cases = 0;
  for (const nlohmann::json& c : f["edge"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const auto truth = c["truth"].get<std::vector<Tags>>();
    const auto predicted = c["pred"].get<std::vector<Tags>>();
    for (const char* side : {"truth", "pred"}) {
      const auto sentences = c[side].get<std::vector<Tags>>();
      const nlohmann::json& want = c[std::string(side) + "_entities"];
      ASSERT_EQ(want.size(), sentences.size());
      for (std::size_t s = 0; s < sentences.size(); ++s) {
        Entities expected;  // seqeval's ends are inclusive
        for (const nlohmann::json& e : want[s]) {
          expected.push_back(
              {e[0].get<std::string>(), e[1].get<std::int64_t>(), e[2].get<std::int64_t>() + 1});
        }
        EXPECT_EQ(tag_entities(sentences[s]), expected) << side << " sentence " << s;
      }
    }
    expect_scores(seqeval_scores(truth, predicted), c["scores"]);
    ++cases;
  }
  EXPECT_EQ(cases, 15);
}

TEST(SeqevalOracle, Conll2003ValidMatchesSeqeval) {
  const nlohmann::json f = load_fixture();
  int cases = 0;
  for (const nlohmann::json& c : f["conll"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    expect_scores(seqeval_scores(decode(c, "truth"), decode(c, "pred")), c["scores"]);
    ++cases;
  }
  EXPECT_EQ(cases, 5);
}

}  // namespace
}  // namespace bertfit
