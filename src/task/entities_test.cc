// Entities against transformers 4.28.1's TokenClassificationPipeline: tests/fixtures/
// entities.json (made by tests/fixtures/make_entities_fixture.py) holds synthetic tokenized texts
// with accents, emoji, decomposed characters and runs of spaces, the pipeline's float32
// probabilities, its is_subword per token and its entities for every strategy; every entity
// must match (tag, span, word, score). Plus the UTF-8 slicing and a few hand-made groupings.
#include "task/entities.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "io/json.h"

namespace bertfit {
namespace {

nlohmann::json fixture() {
  return read_json_file(std::string(BERTFIT_SOURCE_DIR) + "/tests/fixtures/entities.json");
}

// The fixture's tokens as aggregate_entities takes them, is_subword decided by our helpers.
std::vector<TokenScores> tokens_of(const nlohmann::json& c) {
  const std::string text = c["text"];
  const Utf8Chars chars(text);
  const bool prefix = c["prefix"];
  std::vector<TokenScores> out;
  std::size_t row = 0;
  for (std::size_t i = 0; i < c["tokens"].size(); ++i) {
    const nlohmann::json& t = c["tokens"][i];  // [token, start, end, unk, special]
    if (t[4].get<bool>()) continue;
    TokenScores s;
    s.start = t[1];
    s.end = t[2];
    s.index = static_cast<std::int64_t>(i);
    const std::string token = t[0];
    const bool unk = t[3];
    s.is_subword = prefix ? is_subword_by_prefix(token, chars, s.start, s.end, unk)
                          : is_subword_by_spaces(chars, s.start, unk);
    for (const nlohmann::json& p : c["probs"][row]) s.probs.push_back(p.get<float>());
    out.push_back(std::move(s));
    ++row;
  }
  return out;
}

TEST(Entities, SubwordsAreThoseOfThePipeline) {
  const nlohmann::json f = fixture();  // a local: a temporary's ["cases"] would dangle
  int subwords = 0;
  for (const nlohmann::json& c : f["cases"]) {
    const std::vector<TokenScores> tokens = tokens_of(c);
    ASSERT_EQ(tokens.size(), c["is_subword"].size());
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      EXPECT_EQ(tokens[i].is_subword, c["is_subword"][i].get<bool>())
          << c["text"] << " prefix " << c["prefix"] << " token " << i;
      subwords += tokens[i].is_subword;
    }
  }
  EXPECT_GT(subwords, 50);  // the fixture does exercise word aggregation
}

// The pipeline's scores are float32 (its softmax, np.mean and np.nanmean of float32): a mean of
// n <= 40 values in [0, 1] is off by at most ~log2(n) float32 roundings, 6 * 6e-8 < 1e-6; ours are
// exact float32 inputs averaged in double.
constexpr double kScoreTolerance = 1e-6;

TEST(Entities, MatchThePipelineForEveryStrategy) {
  const nlohmann::json f = fixture();
  int compared = 0;
  for (const nlohmann::json& c : f["cases"]) {
    const std::string text = c["text"];
    const std::vector<std::string> labels = c["labels"];
    const std::vector<TokenScores> tokens = tokens_of(c);
    for (const nlohmann::json& r : c["results"]) {
      const std::string name = r["strategy"];
      const std::optional<Aggregation> how = parse_aggregation(name);
      ASSERT_TRUE(how.has_value()) << name;
      const std::vector<std::string> ignore = r["ignore_labels"];
      const std::vector<Entity> got = aggregate_entities(tokens, labels, *how, text, ignore);
      const nlohmann::json& want = r["entities"];
      ASSERT_EQ(got.size(), want.size()) << text << " prefix " << c["prefix"] << " " << name;
      for (std::size_t i = 0; i < got.size(); ++i) {
        // [entity or entity_group, score, start, end, word(, index)]
        const nlohmann::json& w = want[i];
        const std::string where = cat(text, " prefix ", c["prefix"], " ", name, " #", i);
        if (*how == Aggregation::kNone) {
          EXPECT_EQ(got[i].entity, w[0].get<std::string>()) << where;
          EXPECT_EQ(got[i].entity_group, "") << where;
          EXPECT_EQ(got[i].index, w[5].get<std::int64_t>()) << where;
        } else {
          EXPECT_EQ(got[i].entity_group, w[0].get<std::string>()) << where;
          EXPECT_EQ(got[i].entity, "") << where;
          EXPECT_EQ(got[i].index, -1) << where;
        }
        EXPECT_NEAR(got[i].score, w[1].get<double>(), kScoreTolerance) << where;
        EXPECT_EQ(got[i].start, w[2].get<std::int64_t>()) << where;
        EXPECT_EQ(got[i].end, w[3].get<std::int64_t>()) << where;
        EXPECT_EQ(got[i].word, w[4].get<std::string>()) << where;
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 500);
}

TEST(Entities, ParseAggregationKnowsTheFiveNames) {
  for (const char* name : {"none", "simple", "first", "average", "max"}) {
    const std::optional<Aggregation> how = parse_aggregation(name);
    ASSERT_TRUE(how.has_value()) << name;
    EXPECT_STREQ(aggregation_name(*how), name);
  }
  EXPECT_FALSE(parse_aggregation("Simple").has_value());
  EXPECT_FALSE(parse_aggregation("").has_value());
  EXPECT_FALSE(parse_aggregation("mean").has_value());
}

TEST(Utf8Chars, SlicesCodePointsAsPythonDoes) {
  const std::string text = "Zoë 👍🏽  e\xcc\x81t\xe2\x82";  // e + combining acute; a cut-off €
  const Utf8Chars chars(text);
  // Z o ë ' ' 👍 🏽 ' ' ' ' e ◌́ t \xe2 \x82: the two bytes of the cut-off sequence count
  // one each.
  EXPECT_EQ(chars.size(), 13);
  EXPECT_EQ(chars.slice(0, 3), "Zoë");
  EXPECT_EQ(chars.slice(4, 6), "👍🏽");
  EXPECT_EQ(chars.slice(6, 8), "  ");
  EXPECT_EQ(chars.slice(8, 10), "e\xcc\x81");
  EXPECT_EQ(chars.slice(11, 12), "\xe2");
  EXPECT_EQ(chars.slice(10, 99), "t\xe2\x82");  // clamped
  EXPECT_EQ(chars.slice(-3, 1), "Z");
  EXPECT_EQ(chars.slice(5, 5), "");
  EXPECT_EQ(chars.slice(7, 2), "");
  EXPECT_EQ(Utf8Chars("").size(), 0);
}

TEST(Entities, SubwordRules) {
  const Utf8Chars text("New  Yorkers, café");
  EXPECT_FALSE(is_subword_by_prefix("new", text, 0, 3, false));
  EXPECT_TRUE(is_subword_by_prefix("##ers", text, 9, 12, false));
  EXPECT_FALSE(is_subword_by_prefix(",", text, 12, 13, false));     // punctuation starts a word
  EXPECT_FALSE(is_subword_by_prefix("cafe", text, 14, 18, false));  // é is one character
  EXPECT_FALSE(is_subword_by_prefix("[UNK]", text, 14, 18, true));
  EXPECT_TRUE(is_subword_by_prefix("[UNK]", text, 14, 18, false));
  EXPECT_FALSE(is_subword_by_spaces(text, 0, false));
  EXPECT_FALSE(is_subword_by_spaces(text, 5, false));  // after a space
  EXPECT_TRUE(is_subword_by_spaces(text, 9, false));
  EXPECT_TRUE(is_subword_by_spaces(text, 12, false));  // the fallback joins punctuation
  EXPECT_FALSE(is_subword_by_spaces(text, 12, true));
}

TokenScores token(std::vector<float> probs, std::int64_t start, std::int64_t end,
                  bool is_subword = false) {
  return {std::move(probs), start, end, is_subword, start};
}

// The example of aggregate_words' docstring: micro|soft| com|pany| tagged B-ENT I-NAME I-ENT
// I-ENT is "microsoft company" ENT with first, but splits with simple.
TEST(Entities, WordAggregationForcesOneTagPerWord) {
  const std::vector<std::string> labels = {"O", "B-ENT", "I-ENT", "B-NAME", "I-NAME"};
  const std::string text = "microsoft company";
  const std::vector<TokenScores> tokens = {token({0.1f, 0.6f, 0.1f, 0.1f, 0.1f}, 0, 5),
                                           token({0.1f, 0.1f, 0.1f, 0.0f, 0.7f}, 5, 9, true),
                                           token({0.1f, 0.1f, 0.8f, 0.0f, 0.0f}, 10, 13),
                                           token({0.0f, 0.0f, 0.9f, 0.1f, 0.0f}, 13, 17, true)};
  const std::vector<Entity> first = aggregate_entities(tokens, labels, Aggregation::kFirst, text);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].entity_group, "ENT");
  EXPECT_EQ(first[0].word, "microsoft company");
  EXPECT_NEAR(first[0].score, (0.6 + 0.8) / 2, 1e-7);
  const std::vector<Entity> simple = aggregate_entities(tokens, labels, Aggregation::kSimple, text);
  ASSERT_EQ(simple.size(), 3u);
  EXPECT_EQ(simple[0].word, "micro");
  EXPECT_EQ(simple[1].entity_group, "NAME");
  EXPECT_EQ(simple[2].word, "company");
  // max: "soft" holds the word's largest probability (I-NAME), "pany" the other's (I-ENT).
  const std::vector<Entity> max = aggregate_entities(tokens, labels, Aggregation::kMax, text);
  ASSERT_EQ(max.size(), 2u);
  EXPECT_EQ(max[0].entity_group, "NAME");
  EXPECT_EQ(max[0].word, "microsoft");
  EXPECT_NEAR(max[0].score, 0.7, 1e-7);
  EXPECT_EQ(max[1].entity_group, "ENT");
  EXPECT_TRUE(aggregate_entities({}, labels, Aggregation::kSimple, "").empty());
}

// Ties as numpy and Python break them: the first tag of the largest probability (argmax), and
// with max the first token of the word holding the largest probability (max()).
TEST(Entities, TiesGoToTheFirst) {
  const std::vector<std::string> labels = {"O", "B-PER", "I-PER", "B-LOC", "I-LOC"};
  const std::string text = "Ada Lovelace";
  const std::vector<TokenScores> tokens = {token({0.1f, 0.2f, 0.1f, 0.4f, 0.2f}, 0, 3),
                                           token({0.0f, 0.0f, 0.4f, 0.2f, 0.4f}, 4, 8),
                                           token({0.1f, 0.0f, 0.1f, 0.0f, 0.8f}, 8, 12, true)};
  const std::vector<Entity> none = aggregate_entities(tokens, labels, Aggregation::kNone, text);
  ASSERT_EQ(none.size(), 3u);
  EXPECT_EQ(none[1].entity, "I-PER");  // I-PER and I-LOC tie at 0.4
  EXPECT_EQ(none[1].index, 4);
  const std::vector<TokenScores> tied = {token({0.1f, 0.2f, 0.1f, 0.4f, 0.2f}, 0, 3),
                                         token({0.0f, 0.0f, 0.4f, 0.2f, 0.4f}, 4, 8),
                                         token({0.1f, 0.0f, 0.1f, 0.4f, 0.4f}, 8, 12, true)};
  const std::vector<Entity> max = aggregate_entities(tied, labels, Aggregation::kMax, text);
  ASSERT_EQ(max.size(), 2u);
  EXPECT_EQ(max[0].entity_group, "LOC");
  EXPECT_EQ(max[1].entity_group, "PER");  // "Love" (I-PER) before "lace" (I-LOC), both 0.4
  EXPECT_EQ(max[1].word, "Lovelace");
}

}  // namespace
}  // namespace bertfit
