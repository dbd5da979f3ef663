// `bertfit serve` on token classifiers through the binary (issue 33): /predict answers each
// text's entities as the Hub's token-classification API does (entity_group, score, word,
// start, end in characters; `entity` and `index` for aggregation none), equal to `bertfit
// predict`'s entities on the same texts for every aggregation strategy (also from
// `parameters`), for WordPiece and byte-level BPE, in fp32 and int8; a list of texts is a batch
// (two texts are two inputs, not a pair); pairs, raw_scores and unknown strategies are refused
// in one line; truncation keeps the spans in the text, from either end; /info says the task. A
// folder whose config.json names no architectures is served by the head its tensors hold.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_util.h"
#include "serve_client.h"

namespace bertfit::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::vector<std::string>& texts() {
  static const std::vector<std::string> t = {
      "Zoë  Müller flew from Köln to São Paulo 🎉 with   Ana.", "  leading spaces and ünïcödé  ",
      "EU rejects German call to boycott British lamb .", "x", ""};
  return t;
}

std::string golden_model(const std::string& name) {
  return shared_dir() + "/golden/" + name + "/model";
}

// A copy of a golden token classifier with the architectures save_pretrained writes.
std::string with_architectures(const TempDir& tmp, const std::string& name,
                               const std::string& cls) {
  const std::string dir = tmp / name;
  fs::copy(golden_model(name), dir);
  json config = json::parse(read_text(dir + "/config.json"));
  config["architectures"] = {cls};
  write_text(dir + "/config.json", config.dump(2));
  return dir;
}

// `bertfit predict`'s entities of each text, for one strategy.
std::vector<json> predict_entities(const TempDir& tmp, const std::string& model,
                                   const std::string& how, const std::string& extra = "") {
  std::string jsonl;
  for (const std::string& t : texts()) jsonl += json{{"text", t}}.dump() + "\n";
  write_text(tmp / "texts.jsonl", jsonl);
  const RunResult p =
      run_bertfit("predict --model " + model + " --input " + (tmp / "texts.jsonl") +
                  " --text-a-column text --max-seq-len 62 --aggregation-strategy " + how + extra);
  EXPECT_EQ(p.exit_code, 0) << p.err;
  std::vector<json> out;
  std::istringstream lines(p.out);
  for (std::string line; std::getline(lines, line);) out.push_back(json::parse(line)["entities"]);
  return out;
}

// The same entities (groups or tags, words, spans, index) with scores within tol.
void expect_same_entities(const json& served, const json& predicted, const std::string& text,
                          double tol) {
  ASSERT_TRUE(served.is_array()) << served;
  ASSERT_EQ(served.size(), predicted.size()) << served << "\nvs " << predicted;
  for (std::size_t i = 0; i < served.size(); ++i) {
    const json& s = served[i];
    const json& p = predicted[i];
    for (const char* key : {"entity_group", "entity", "index", "word", "start", "end"}) {
      EXPECT_EQ(s.contains(key), p.contains(key)) << key << ": " << s;
      if (p.contains(key)) {
        EXPECT_EQ(s[key], p[key]) << key << ": " << s;
      }
    }
    EXPECT_NEAR(s["score"].get<double>(), p["score"].get<double>(), tol) << s;
    EXPECT_EQ(char_slice(text, s["start"], s["end"]), s["word"].get<std::string>()) << s;
  }
}

std::string body(const json& inputs, const json& extra = json::object()) {
  json b = extra;
  b["inputs"] = inputs;
  return b.dump();
}

TEST(ServeTokenCli, EntitiesEqualPredictsForEveryStrategyAndPrecision) {
  TempDir tmp;
  for (auto [name, cls] : {std::pair{"bert-tokcls-tiny", "BertForTokenClassification"},
                           std::pair{"roberta-tokcls-tiny", "RobertaForTokenClassification"}}) {
    const std::string model = with_architectures(tmp, name, cls);
    for (const char* precision : {"fp32", "int8"}) {
      SCOPED_TRACE(std::string(name) + " " + precision);
      const std::string p = std::string(" --precision ") + precision;
      ServeProcess server("--model " + model + " --max-batch-tokens 4096" + p);
      ASSERT_TRUE(server.started()) << server.err();
      HttpClient client(server.port());
      for (const char* how : {"simple", "first", "average", "max", "none"}) {
        SCOPED_TRACE(how);
        const std::vector<json> expected = predict_entities(tmp, model, how, p);
        ASSERT_EQ(expected.size(), texts().size());
        // One text at a time, the strategy at the top and (the Hub's form) in `parameters`.
        for (std::size_t i = 0; i < texts().size(); ++i) {
          const json in_parameters = {{"parameters", {{"aggregation_strategy", how}}}};
          const json at_top = {{"aggregation_strategy", how}};
          for (const json& extra : {in_parameters, at_top}) {
            HttpReply r = client.post("/predict", body(texts()[i], extra));
            ASSERT_EQ(r.status, 200) << r.body;
            expect_same_entities(json::parse(r.body), expected[i], texts()[i], 1e-5);
          }
        }
        // All as one batch: a list of answers in input order.
        HttpReply r = client.post("/predict", body(texts(), {{"aggregation_strategy", how}}));
        ASSERT_EQ(r.status, 200) << r.body;
        const json answers = json::parse(r.body);
        ASSERT_EQ(answers.size(), texts().size());
        for (std::size_t i = 0; i < texts().size(); ++i) {
          expect_same_entities(answers[i], expected[i], texts()[i], 1e-5);
        }
      }
      // The default strategy is simple.
      const std::vector<json> simple = predict_entities(tmp, model, "simple", p);
      HttpReply r = client.post("/predict", body(texts()[0]));
      ASSERT_EQ(r.status, 200) << r.body;
      expect_same_entities(json::parse(r.body), simple[0], texts()[0], 1e-5);
      // Any entity found at all (the check above is not vacuous).
      std::size_t found = 0;
      for (const json& e : simple) found += e.size();
      EXPECT_GT(found, 0u);
    }
  }
}

TEST(ServeTokenCli, BatchesPairsTruncationAndRefusals) {
  TempDir tmp;
  const std::string model =
      with_architectures(tmp, "bert-tokcls-tiny", "BertForTokenClassification");
  ServeProcess server("--model " + model + " --max-batch-tokens 4096");
  ASSERT_TRUE(server.started()) << server.err();
  HttpClient client(server.port());
  // Two texts are a batch of two, not a pair.
  HttpReply r = client.post("/predict", body({"Paris is big", "Ana met Bo"}));
  ASSERT_EQ(r.status, 200) << r.body;
  json answers = json::parse(r.body);
  ASSERT_EQ(answers.size(), 2u);
  ASSERT_TRUE(answers[0].is_array() && answers[1].is_array()) << answers;
  // [text] is one text.
  r = client.post("/predict", body(json::array({json::array({"Paris is big"})})));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)[0], answers[0]);
  // Refusals, one line each.
  struct Refusal {
    std::string body;
    int status;
    std::string needle;
  };
  const std::vector<Refusal> refusals = {
      {body(json::array({json::array({"a", "b"})})), 422, "`inputs[0]` is a pair of texts"},
      {body("a", {{"raw_scores", true}}), 422, "`raw_scores` applies to sequence classifiers"},
      {body("a", {{"aggregation_strategy", "longest"}}), 422,
       "`aggregation_strategy` must be one of none, simple, first, average, max; got \"longest\""},
      {body("a",
            {{"aggregation_strategy", "first"}, {"parameters", {{"aggregation_strategy", "max"}}}}),
       400, "`aggregation_strategy` is given twice"},
      {body("a", {{"parameters", 3}}), 400, "`parameters` must be an object"},
      {body("a", {{"aggregation_strategy", 1}}), 400, "`aggregation_strategy` must be a string"},
  };
  for (const Refusal& x : refusals) {
    r = client.post("/predict", x.body);
    EXPECT_EQ(r.status, x.status) << x.body << ": " << r.body;
    EXPECT_NE(json::parse(r.body)["error"].get<std::string>().find(x.needle), std::string::npos)
        << r.body;
  }
  // Truncation: 600 words do not fit 512 tokens; refused without truncate, and cut at either
  // end with it, the spans still indexing the text.
  std::string long_text;
  for (int i = 0; i < 600; ++i) long_text += (i % 3 == 0 ? "Paris " : i % 3 == 1 ? "is " : "Ana ");
  r = client.post("/predict", body(long_text));
  EXPECT_EQ(r.status, 422) << r.body;
  for (const char* direction : {"right", "left"}) {
    SCOPED_TRACE(direction);
    r = client.post("/predict", body(long_text, {{"truncate", true},
                                                 {"truncation_direction", direction},
                                                 {"aggregation_strategy", "none"}}));
    ASSERT_EQ(r.status, 200) << r.body;
    const json entities = json::parse(r.body);
    ASSERT_FALSE(entities.empty());
    std::int64_t lo = 1 << 30, hi = 0;
    for (const json& e : entities) {
      EXPECT_EQ(char_slice(long_text, e["start"], e["end"]), e["word"].get<std::string>()) << e;
      lo = std::min<std::int64_t>(lo, e["start"]);
      hi = std::max<std::int64_t>(hi, e["end"]);
    }
    // 510 of the text's 600 one-token words remain: the kept ones are the first (right) or the
    // last (left); the 90 words cut take 90 × 4.33 characters on average.
    const auto n = static_cast<std::int64_t>(long_text.size());
    if (std::string(direction) == "right") {
      EXPECT_LT(hi, n - 300);
    } else {
      EXPECT_GT(lo, 300);
    }
  }
  // /info says the task and the tags.
  r = client.get("/info");
  ASSERT_EQ(r.status, 200);
  const json info = json::parse(r.body);
  EXPECT_EQ(info["task"], "token-classification");
  EXPECT_EQ(info["model_type"]["token_classifier"]["id2label"]["3"], "B-PER") << info;
  EXPECT_FALSE(info["model_type"].contains("classifier")) << info;
}

// The golden folder itself names no architectures: its tensors (a classifier, no pooler) make it
// a token classifier, for serve as for predict; a sequence classifier's server says its task.
TEST(ServeTokenCli, HeadFromTheTensorsWhenArchitecturesIsAbsentAndTheTaskInInfo) {
  TempDir tmp;
  {
    ServeProcess server("--model " + golden_model("bert-tokcls-tiny"));
    ASSERT_TRUE(server.started()) << server.err();
    HttpClient client(server.port());
    EXPECT_EQ(json::parse(client.get("/info").body)["task"], "token-classification");
    HttpReply r = client.post("/predict", body("Paris is big"));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(json::parse(r.body).is_array());
  }
  const std::string sequence = tmp / "sequence";
  init_tiny_model(sequence, "bert", 3);
  ServeProcess server("--model " + sequence);
  ASSERT_TRUE(server.started()) << server.err();
  HttpClient client(server.port());
  const json info = json::parse(client.get("/info").body);
  EXPECT_EQ(info["task"], "text-classification");
  EXPECT_TRUE(info["model_type"].contains("classifier")) << info;
  // TEI's pair rule holds for a sequence classifier: two texts are one pair, one answer.
  HttpReply r = client.post("/predict", body({"a", "b"}, {{"aggregation_strategy", "none"}}));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body).size(), 3u);  // one answer: the 3 labels' scores
}

}  // namespace
}  // namespace bertfit::testing
