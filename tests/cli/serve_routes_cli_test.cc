// serve's remaining TEI routes through the binary (issue 34, item 3): /embed_all gives
// sentence-transformers' token embeddings of the golden st-bert-mean-tiny model (every real
// token, [CLS] and [SEP] included; tests/fixtures/embed_all.json), whose mean is `bertfit
// embed`'s vector; /similarity the cosines of /embed's vectors; /decode transformers' slow
// tokenizers' decode() for WordPiece, byte-level BPE and SentencePiece model folders
// (tests/fixtures/decode.json), with clean_up_tokenization_spaces as each folder says; a route
// the model cannot serve is TEI's 424 naming the model's task, and /info lists the routes it
// serves; the request limits and dynamic batching hold for the new routes.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cli_util.h"
#include "serve_client.h"

namespace bertfit::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string st_model() { return shared_dir() + "/golden/st-bert-mean-tiny/model"; }
json fixture(const std::string& name) {
  return json::parse(read_text(std::string(BERTFIT_SOURCE_DIR) + "/tests/fixtures/" + name));
}

// Equal numbers (within tol) in equal shapes.
bool close(const json& a, const json& b, double tol = 1e-5) {
  if (a.is_number() && b.is_number()) return std::abs(a.get<double>() - b.get<double>()) <= tol;
  if (!a.is_array() || !b.is_array() || a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!close(a[i], b[i], tol)) return false;
  }
  return true;
}

// The mean of the rows, L2-normalized: the golden model's pooling and Normalize.
std::vector<float> normalized_mean(const json& rows) {
  std::vector<double> sum(rows[0].size(), 0.0);
  for (const json& row : rows) {
    for (std::size_t k = 0; k < sum.size(); ++k) sum[k] += row[k].get<double>();
  }
  double norm = 0;
  for (double& x : sum) norm += (x / rows.size()) * (x / rows.size());
  std::vector<float> out;
  for (double x : sum) out.push_back(static_cast<float>(x / rows.size() / std::sqrt(norm)));
  return out;
}

TEST(ServeRoutesCli, EmbedAllIsTheLastLayerAtEveryToken) {
  const json want = fixture("embed_all.json");
  const auto texts = want["texts"].get<std::vector<std::string>>();
  ServeProcess server("--model " + st_model() + " --max-batch-requests 2");
  ASSERT_TRUE(server.started()) << server.err();
  HttpClient client(server.port());
  HttpReply r = client.post("/embed_all", json{{"inputs", texts}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json all = json::parse(r.body);
  ASSERT_EQ(all.size(), texts.size());
  // `bertfit embed` of the same texts: the mean of each input's rows, normalized.
  TempDir tmp;
  std::string jsonl;
  for (const std::string& t : texts) jsonl += json{{"text", t}}.dump() + "\n";
  write_text(tmp / "texts.jsonl", jsonl);
  RunResult e = run_bertfit("embed --model " + st_model() + " --input " + (tmp / "texts.jsonl") +
                            " --text-a-column text");
  ASSERT_EQ(e.exit_code, 0) << e.err;
  std::vector<json> embedded;
  for (std::size_t at = 0, end; (end = e.out.find('\n', at)) != std::string::npos; at = end + 1) {
    embedded.push_back(json::parse(e.out.substr(at, end - at)));
  }
  ASSERT_EQ(embedded.size(), texts.size());
  for (std::size_t i = 0; i < texts.size(); ++i) {
    SCOPED_TRACE(texts[i]);
    const json& rows = want["token_embeddings"][i];
    ASSERT_EQ(all[i].size(), rows.size());  // every real token, the special ones too
    ASSERT_EQ(all[i].size(), want["input_ids"][i].size());
    for (std::size_t t = 0; t < rows.size(); ++t) {
      ASSERT_EQ(all[i][t].size(), 16u);
      for (std::size_t k = 0; k < 16; ++k) {
        EXPECT_NEAR(all[i][t][k].get<double>(), rows[t][k].get<double>(), 1e-5) << t << "," << k;
      }
    }
    const std::vector<float> mean = normalized_mean(all[i]);
    const auto vector = embedded[i]["embedding"].get<std::vector<float>>();
    for (std::size_t k = 0; k < 16; ++k) EXPECT_NEAR(mean[k], vector[k], 1e-5);
  }
  // One text: a list of one; the rows are /tokenize's tokens.
  r = client.post("/embed_all", json{{"inputs", texts[2]}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body), json::array({all[2]}));
  // Four inputs, at most two per batch: every batch held two or fewer.
  const std::string metrics = client.get("/metrics").body;
  const long batches = metric_value(metrics, "bertfit_batch_size_count");
  EXPECT_GE(batches, 2);
  EXPECT_EQ(metric_value(metrics, "bertfit_batch_size_bucket{le=\"2\"}"), batches) << metrics;
  // Truncation and the length limit: the folder's max_seq_length (64, below the 512 positions),
  // as sentence-transformers and TEI cut; the batch limits, a prompt it lacks.
  std::string long_text;
  for (int i = 0; i < 600; ++i) long_text += "a ";
  r = client.post("/embed_all", json{{"inputs", long_text}}.dump());
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_NE(r.body.find("64"), std::string::npos) << r.body;
  for (const char* direction : {"right", "left"}) {
    r = client.post(
        "/embed_all",
        json{{"inputs", long_text}, {"truncate", true}, {"truncation_direction", direction}}
            .dump());
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(json::parse(r.body)[0].size(), 64u);
  }
  EXPECT_EQ(json::parse(client.get("/info").body)["max_input_length"], 64);
  // /embed of a text longer than max_seq_length: the vector `embed --truncate` gives (the one
  // sentence-transformers' encode gives, cut at max_seq_length), not the one cut at 512.
  std::string words;
  for (int i = 0; i < 100; ++i) words += "word" + std::to_string(i % 7) + " ";
  r = client.post("/embed", json{{"inputs", words}, {"truncate", true}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  write_text(tmp / "long.jsonl", json{{"text", words}}.dump() + "\n");
  RunResult cut = run_bertfit("embed --model " + st_model() + " --input " + (tmp / "long.jsonl") +
                              " --text-a-column text --truncate");
  ASSERT_EQ(cut.exit_code, 0) << cut.err;
  const auto want_cut =
      json::parse(cut.out.substr(0, cut.out.find('\n')))["embedding"].get<std::vector<float>>();
  const auto got_cut = json::parse(r.body)[0].get<std::vector<float>>();
  ASSERT_EQ(got_cut.size(), want_cut.size());
  for (std::size_t k = 0; k < got_cut.size(); ++k) EXPECT_NEAR(got_cut[k], want_cut[k], 1e-5) << k;
  for (const auto& [body, status] :
       {std::pair{json{{"inputs", std::vector<std::string>(33, "a")}}.dump(), 413},
        std::pair{json{{"inputs", json::array()}}.dump(), 400},
        std::pair{json{{"inputs", 3}}.dump(), 400},
        std::pair{json{{"inputs", "a"}, {"prompt_name", "query"}}.dump(), 422}}) {
    r = client.post("/embed_all", body);
    EXPECT_EQ(r.status, status) << body << ": " << r.body;
  }
}

TEST(ServeRoutesCli, SimilarityIsTheCosineOfEmbedsVectors) {
  const json want = fixture("embed_all.json");
  const auto texts = want["texts"].get<std::vector<std::string>>();
  ServeProcess server("--model " + st_model());
  ASSERT_TRUE(server.started()) << server.err();
  HttpClient client(server.port());
  HttpReply r = client.post("/embed", json{{"inputs", texts}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const auto vectors = json::parse(r.body).get<std::vector<std::vector<float>>>();
  const std::vector<std::string> others(texts.begin() + 1, texts.end());
  r = client.post("/similarity",
                  json{{"inputs", {{"source_sentence", texts[0]}, {"sentences", others}}}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json cosines = json::parse(r.body);
  ASSERT_EQ(cosines.size(), others.size());
  for (std::size_t i = 0; i < others.size(); ++i) {
    EXPECT_NEAR(cosines[i].get<double>(), cosine(vectors[0], vectors[i + 1]), 1e-6) << i;
  }
  // The source with itself.
  r = client.post("/similarity",
                  json{{"inputs", {{"source_sentence", "a b"}, {"sentences", {"a b"}}}},
                       {"parameters", nullptr}}
                      .dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NEAR(json::parse(r.body)[0].get<double>(), 1.0, 1e-6);
  // parameters: truncate (and its direction) as /embed's; an unknown prompt is a 422.
  std::string long_text;
  for (int i = 0; i < 600; ++i) long_text += "b ";
  auto ask = [&](const json& parameters, std::size_t n = 1) {
    return client.post(
        "/similarity",
        json{{"inputs",
              {{"source_sentence", long_text}, {"sentences", std::vector<std::string>(n, "b")}}},
             {"parameters", parameters}}
            .dump());
  };
  EXPECT_EQ(ask(json::object()).status, 422);
  r = ask({{"truncate", true}, {"truncation_direction", "left"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_GT(json::parse(r.body)[0].get<double>(), 0.5);
  EXPECT_EQ(ask({{"truncate", true}, {"prompt_name", "query"}}).status, 422);
  // The source counts in the batch: 31 sentences fit --max-client-batch-size 32, 32 do not.
  EXPECT_EQ(ask({{"truncate", true}}, 31).status, 200);
  r = ask({{"truncate", true}}, 32);
  EXPECT_EQ(r.status, 413) << r.body;
  EXPECT_NE(r.body.find("batch size 33 > maximum allowed batch size 32"), std::string::npos);
  r = ask({{"truncate", true}}, 0);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(json::parse(r.body)["error_type"], "empty");
  for (const char* body : {R"({"inputs": ["a", "b"]})", R"({"inputs": {"sentences": ["a"]}})",
                           R"({"inputs": {"source_sentence": "a", "sentences": [1]}})",
                           R"({"inputs": {"source_sentence": "a", "sentences": ["b"]},
                               "parameters": 3})"}) {
    EXPECT_EQ(client.post("/similarity", body).status, 400) << body;
  }
}

// /decode of every fixture id list, skipping special tokens or not, through a server on a model
// folder of each tokenizer family.
void expect_decodes(const std::string& model, const json& family, bool clean_up) {
  ServeProcess server("--model " + model + " --max-client-batch-size 64");
  ASSERT_TRUE(server.started()) << server.err();
  HttpClient client(server.port());
  json lists = json::array();
  for (const json& c : family["cases"]) lists.push_back(c["ids"]);
  const int first = clean_up ? 0 : 2;  // [skip+clean, clean, skip, neither]
  for (bool skip : {true, false}) {
    json body = {{"ids", lists}};
    if (!skip) body["skip_special_tokens"] = false;  // default: true
    HttpReply r = client.post("/decode", body.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    const json texts = json::parse(r.body);
    ASSERT_EQ(texts.size(), lists.size());
    for (std::size_t i = 0; i < lists.size(); ++i) {
      EXPECT_EQ(texts[i], family["cases"][i]["text"][first + (skip ? 0 : 1)]) << lists[i];
    }
  }
  // One list: a list of one text; [] is one empty list.
  HttpReply r = client.post("/decode", json{{"ids", lists[0]}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body), json::array({family["cases"][0]["text"][first]}));
  r = client.post("/decode", R"({"ids": []})");
  EXPECT_EQ(r.body, R"([""])");
}

TEST(ServeRoutesCli, DecodeEqualsTheSlowTokenizersForEachFamily) {
  const json want = fixture("decode.json");
  const std::string golden = shared_dir() + "/golden";
  expect_decodes(st_model(), want["bert"], true);
  expect_decodes(golden + "/xlmr-tiny/model", want["xlmr"], true);
  // roberta-tiny's vocabulary with ../shared/data/roberta-bpe's tokenizer_config.json, which
  // turns clean_up_tokenization_spaces off.
  TempDir tmp;
  fs::copy(golden + "/roberta-tiny/model", tmp / "roberta");
  fs::copy_file(shared_dir() + "/data/roberta-bpe/tokenizer_config.json",
                tmp / "roberta/tokenizer_config.json", fs::copy_options::overwrite_existing);
  expect_decodes(tmp / "roberta", want["roberta"], false);
  expect_decodes(golden + "/roberta-tiny/model", want["roberta"], true);
  // Refusals: an id outside the vocabulary, ids that are not u32, the batch and token limits.
  ServeProcess server("--model " + st_model() + " --max-batch-tokens 512");
  ASSERT_TRUE(server.started()) << server.err();
  HttpClient client(server.port());
  HttpReply r = client.post("/decode", R"({"ids": [101, 30522]})");
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_EQ(json::parse(r.body),
            (json{{"error", "token id 30522 is outside the vocabulary (0..30521)"},
                  {"error_type", "tokenizer"}}));
  for (const char* body :
       {R"({"ids": [-1]})", R"({"ids": [1.5]})", R"({"ids": "101"})", R"({"ids": [[1], 2]})",
        R"({"ids": [4294967296]})", R"({})", R"({"ids": [1], "skip_special_tokens": 1})"}) {
    EXPECT_EQ(client.post("/decode", body).status, 400) << body;
  }
  EXPECT_EQ(
      client.post("/decode", json{{"ids", std::vector<std::vector<int>>(33, {1})}}.dump()).status,
      413);
  EXPECT_EQ(client.post("/decode", json{{"ids", std::vector<int>(513, 1037)}}.dump()).status, 413);
  EXPECT_EQ(client.post("/decode", json{{"ids", std::vector<int>(512, 1037)}}.dump()).status, 200);
}

// A route the model cannot serve is TEI's 424 ("backend"), naming the model's head and task;
// /info lists the routes it serves.
TEST(ServeRoutesCli, RoutesTheModelCannotServeAre424NamingItsTask) {
  TempDir tmp;
  init_tiny_model(tmp / "cls", "bert", 2);
  init_tiny_model(tmp / "cross", "bert", 1);
  struct Case {
    std::string model, task;
    std::vector<std::string> routes;
  };
  const std::vector<std::string> any = {
      "/",        "/invocations",          "/tokenize", "/decode", "/health", "/ping", "/info",
      "/metrics", "/api-doc/openapi.json", "/docs"};
  auto with_any = [&](std::vector<std::string> r) {
    r.insert(r.end(), any.begin(), any.end());
    std::sort(r.begin(), r.end());
    return r;
  };
  const std::vector<std::string> embed_routes = {"/embed", "/embed_all", "/similarity",
                                                 "/v1/embeddings", "/embeddings"};
  const std::vector<Case> cases = {
      {st_model(), "feature-extraction", with_any(embed_routes)},
      {tmp / "cls", "text-classification", with_any({"/predict"})},
      {tmp / "cross", "text-classification", with_any({"/predict", "/rerank"})},
      {shared_dir() + "/golden/bert-tokcls-tiny/model", "token-classification",
       with_any({"/predict"})}};
  const std::vector<std::pair<std::string, std::string>> bodies = {
      {"/predict", R"({"inputs": "a b"})"},
      {"/rerank", R"({"query": "a", "texts": ["b"]})"},
      {"/embed", R"({"inputs": "a b"})"},
      {"/embed_all", R"({"inputs": "a b"})"},
      {"/similarity", R"({"inputs": {"source_sentence": "a", "sentences": ["b"]}})"},
      {"/v1/embeddings", R"({"input": "a b"})"},
      {"/embeddings", R"({"input": "a b"})"},
      {"/tokenize", R"({"inputs": "a b"})"},
      {"/decode", R"({"ids": [1, 2]})"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.model);
    ServeProcess server("--model " + c.model);
    ASSERT_TRUE(server.started()) << server.err();
    HttpClient client(server.port());
    const json info = json::parse(client.get("/info").body);
    EXPECT_EQ(info["task"], c.task);
    auto routes = info["routes"].get<std::vector<std::string>>();
    std::sort(routes.begin(), routes.end());
    EXPECT_EQ(routes, c.routes);
    long refused = 0;
    for (const auto& [route, body] : bodies) {
      SCOPED_TRACE(route);
      const HttpReply r = client.post(route, body);
      if (std::find(c.routes.begin(), c.routes.end(), route) != c.routes.end()) {
        EXPECT_EQ(r.status, 200) << r.body;
        continue;
      }
      ++refused;
      ASSERT_EQ(r.status, 424) << r.body;
      const json error = json::parse(r.body);
      EXPECT_EQ(error["error_type"], "backend");
      const std::string message = error["error"];
      const char* tei = route == "/predict"  ? "Backend error: Model is not a classifier model: "
                        : route == "/rerank" ? "Backend error: model is not a re-ranker model: "
                                             : "Backend error: Model is not an embedding model: ";
      EXPECT_EQ(message.rfind(tei, 0), 0u) << message;
      EXPECT_NE(message.find("(task " + c.task + "); " + route + " needs "), std::string::npos)
          << message;
    }
    const std::string metrics = client.get("/metrics").body;
    EXPECT_EQ(
        metric_value(metrics, "bertfit_rejections_total{reason=\"model_type\",status=\"424\"}"),
        refused)
        << metrics;
  }
}

// Clients of /embed, /embed_all and /similarity at once: every answer as when asked alone (the
// batcher mixes pooled vectors and token rows in one batch).
TEST(ServeRoutesCli, ConcurrentEmbedAndEmbedAllShareBatches) {
  const json want = fixture("embed_all.json");
  const auto texts = want["texts"].get<std::vector<std::string>>();
  ServeProcess server("--model " + st_model());
  ASSERT_TRUE(server.started()) << server.err();
  HttpClient alone(server.port());
  const json vectors = json::parse(alone.post("/embed", json{{"inputs", texts}}.dump()).body);
  const json rows = json::parse(alone.post("/embed_all", json{{"inputs", texts}}.dump()).body);
  std::atomic<int> ok{0}, bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      HttpClient client(server.port());
      for (int k = 0; k < 30; ++k) {
        const std::size_t i = (t + k) % texts.size();
        const bool all = (t + k) % 2 == 0;
        const HttpReply r =
            client.post(all ? "/embed_all" : "/embed", json{{"inputs", texts[i]}}.dump());
        // Another batch packs and pads differently: the same values up to rounding.
        const bool same =
            r.status == 200 && close(json::parse(r.body)[0], (all ? rows : vectors)[i]);
        ++(same ? ok : bad);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok, 240);
  EXPECT_EQ(bad, 0);
  const std::string metrics = alone.get("/metrics").body;
  EXPECT_LT(metric_value(metrics, "bertfit_batch_size_bucket{le=\"1\"}"),
            metric_value(metrics, "bertfit_batch_size_count"))
      << metrics;
}

}  // namespace
}  // namespace bertfit::testing
