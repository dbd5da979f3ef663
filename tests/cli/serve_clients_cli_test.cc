// bertfit serve as real clients use it (issue 46), through the binary on 127.0.0.1: the requests
// huggingface_hub 0.36.2's InferenceClient, @huggingface/inference 4.13 and the OpenAI Node SDK
// 6.49 sent to the server's base URL (tests/fixtures/clients/requests.jsonl, recorded by
// make_client_fixtures.sh through a proxy, headers and bodies as sent) replayed and their
// answers checked against the routes they stand for; TEI 1.9's routing of POST / and
// /invocations by model type; /info's model_type, served_model_name and problem_type; token-id
// inputs and their refusals; the OpenAPI document against the routes served (both ways); TEI's
// te_* metric names.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli_util.h"
#include "serve_client.h"

namespace bertfit::testing {
namespace {

using nlohmann::json;

std::string fixture_path(const std::string& name) {
  return std::string(BERTFIT_SOURCE_DIR) + "/tests/fixtures/clients/" + name;
}
std::string st_model() { return shared_dir() + "/golden/st-bert-mean-tiny/model"; }
std::string classifier_model() { return shared_dir() + "/golden/bert-tiny/model"; }
std::string tagger_model() { return shared_dir() + "/golden/bert-tokcls-tiny/model"; }

std::vector<json> jsonl(const std::string& path) {
  std::vector<json> rows;
  std::istringstream in(read_text(path));
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) rows.push_back(json::parse(line));
  }
  return rows;
}

// Equal numbers (within tol) in equal shapes; equal everything else.
bool close(const json& a, const json& b, double tol = 1e-5) {
  if (a.is_number() && b.is_number()) return std::abs(a.get<double>() - b.get<double>()) <= tol;
  if (a.is_array() && b.is_array()) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (!close(a[i], b[i], tol)) return false;
    }
    return true;
  }
  if (a.is_object() && b.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto it = a.begin(); it != a.end(); ++it) {
      if (!b.contains(it.key()) || !close(it.value(), b[it.key()], tol)) return false;
    }
    return true;
  }
  return a == b;
}

// The little-endian float32 values of an OpenAI base64 embedding.
std::vector<float> from_base64(const std::string& text) {
  static const std::string kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes;
  unsigned bits = 0;
  int count = 0;
  for (char c : text) {
    if (c == '=') break;
    const std::size_t v = kAlphabet.find(c);
    if (v == std::string::npos) return {};
    bits = (bits << 6) | static_cast<unsigned>(v);
    count += 6;
    if (count >= 8) {
      count -= 8;
      bytes += static_cast<char>((bits >> count) & 0xFF);
    }
  }
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

// Sends a recorded request as it was sent (its method, path, headers and body).
HttpReply replay(HttpClient& client, const json& recorded) {
  const std::string body = recorded["body"];
  std::string req = recorded["method"].get<std::string>() + " " +
                    recorded["path"].get<std::string>() + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  for (const auto& [name, value] : recorded["headers"].items()) {
    req += name + ": " + value.get<std::string>() + "\r\n";
  }
  req += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  client.close();
  EXPECT_TRUE(client.send_raw(req));
  return client.read_reply();
}

// The OpenAI answer's vectors (float or base64), in index order.
std::vector<std::vector<float>> openai_vectors(const json& answer) {
  std::vector<std::vector<float>> out(answer["data"].size());
  for (const json& item : answer["data"]) {
    const json& e = item["embedding"];
    out.at(item["index"].get<std::size_t>()) =
        e.is_string() ? from_base64(e.get<std::string>()) : e.get<std::vector<float>>();
  }
  return out;
}

// The OpenAI request's inputs as /embed takes them (a text or ids: one input; else a batch).
json embed_inputs_of(const json& input) {
  if (input.is_string() || (input.is_array() && !input.empty() && input[0].is_number())) {
    return json::array({input});
  }
  return input;
}

TEST(ServeClientsCli, RecordedClientRequestsAreAnsweredAsTheirRoutes) {
  const std::vector<json> requests = jsonl(fixture_path("requests.jsonl"));
  ASSERT_GE(requests.size(), 16u);
  for (const std::string kind : {"embedder", "classifier", "tagger"}) {
    SCOPED_TRACE(kind);
    const std::string model = kind == "embedder"     ? st_model()
                              : kind == "classifier" ? classifier_model()
                                                     : tagger_model();
    ServeProcess server("--model " + model + " --served-model-name fixture-model");
    ASSERT_TRUE(server.started()) << server.err();
    HttpClient client(server.port()), direct(server.port());
    int replayed = 0;
    for (const json& recorded : requests) {
      if (recorded["model"] != kind) continue;
      SCOPED_TRACE(recorded["client"].get<std::string>() + ": " +
                   recorded["call"].get<std::string>());
      ++replayed;
      const HttpReply r = replay(client, recorded);
      ASSERT_EQ(r.status, 200) << r.body;
      const json body = json::parse(recorded["body"].get<std::string>());
      const json answer = json::parse(r.body);
      const std::string path = recorded["path"];
      if (path == "/v1/embeddings" || path == "/embeddings") {
        EXPECT_EQ(answer["object"], "list");
        EXPECT_EQ(answer["model"], "fixture-model");  // not the request's "any"
        const auto vectors = openai_vectors(answer);
        const json inputs = embed_inputs_of(body["input"]);
        ASSERT_EQ(vectors.size(), inputs.size());
        const HttpReply e = direct.post("/embed", json{{"inputs", inputs}}.dump());
        ASSERT_EQ(e.status, 200) << e.body;
        EXPECT_TRUE(close(json(vectors), json::parse(e.body))) << r.body << "\n" << e.body;
        continue;
      }
      // POST / at the base URL: the model's own route (TEI's routing), with the same body.
      ASSERT_EQ(path, "/");
      const std::string route = kind == "embedder" ? "/embed" : "/predict";
      const HttpReply same = direct.post(route, recorded["body"].get<std::string>());
      ASSERT_EQ(same.status, 200) << same.body;
      EXPECT_TRUE(close(answer, json::parse(same.body))) << r.body << "\n" << same.body;
      if (kind == "embedder") {
        ASSERT_TRUE(answer.is_array() && answer[0].is_array()) << r.body;
        EXPECT_EQ(answer[0].size(), 16u);
      } else if (kind == "classifier") {
        ASSERT_EQ(answer.size(), 3u) << r.body;  // TEI's answer to one text: every label
        EXPECT_TRUE(answer[0].contains("label") && answer[0].contains("score")) << r.body;
      } else {
        ASSERT_TRUE(answer.is_array()) << r.body;
        for (const json& entity : answer) EXPECT_TRUE(entity.contains("entity_group")) << entity;
      }
    }
    EXPECT_GT(replayed, 0);
  }
}

// The token ids the OpenAI fixture sends are the golden model's tokens of its text, so their
// vector is the text's; TEI's validation of ids (vocabulary, length, batch) through the binary.
TEST(ServeClientsCli, TokenIdInputs) {
  ServeProcess server("--model " + st_model() + " --max-client-batch-size 2");
  ASSERT_TRUE(server.started()) << server.err();
  HttpClient client(server.port());
  HttpReply r = client.post("/tokenize", R"({"inputs": "Hello, world!"})");
  ASSERT_EQ(r.status, 200) << r.body;
  std::vector<int> ids;
  const json tokens = json::parse(r.body);
  for (const json& t : tokens[0]) ids.push_back(t["id"]);
  ASSERT_EQ(ids, (std::vector<int>{101, 7592, 1010, 2088, 999, 102}));
  const HttpReply text = client.post("/embed", R"({"inputs": "Hello, world!"})");
  ASSERT_EQ(text.status, 200) << text.body;
  // One list of ids is one input (longer than the batch limit of 2); a list of lists a batch.
  r = client.post("/embed", json{{"inputs", ids}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(close(json::parse(r.body), json::parse(text.body))) << r.body;
  r = client.post("/embed", json{{"inputs", {ids, "Hello, world!"}}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json both = json::parse(r.body);
  EXPECT_TRUE(close(both[0], both[1])) << r.body;
  r = client.post("/v1/embeddings", json{{"input", {ids}}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["usage"]["prompt_tokens"], 6);
  r = client.post("/embed_all", json{{"inputs", ids}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const HttpReply all_text = client.post("/embed_all", R"({"inputs": "Hello, world!"})");
  EXPECT_TRUE(close(json::parse(r.body), json::parse(all_text.body)));
  // Refusals: an id outside the vocabulary (422 naming it), over max_seq_length (64, 422; cut
  // with truncate), too many inputs (413), not ids (400), an empty list (400).
  r = client.post("/embed", R"({"inputs": [101, 30522, 102]})");
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_NE(r.body.find("token id 30522"), std::string::npos) << r.body;
  EXPECT_EQ(json::parse(r.body)["error_type"], "validation");
  const std::vector<int> long_ids(100, 1037);
  r = client.post("/embed", json{{"inputs", long_ids}}.dump());
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_NE(r.body.find("must have less than 64 tokens. Given: 100"), std::string::npos) << r.body;
  r = client.post("/embed", json{{"inputs", long_ids}, {"truncate", true}}.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  r = client.post("/v1/embeddings", json{{"input", {ids, ids, ids}}}.dump());
  EXPECT_EQ(r.status, 413) << r.body;
  EXPECT_EQ(client.post("/embed", R"({"inputs": [101, -1]})").status, 400);
  EXPECT_EQ(client.post("/embed", R"({"inputs": [[101], 7]})").status, 400);
  EXPECT_EQ(client.post("/embed", R"({"inputs": [[]]})").status, 400);
}

// TEI 1.9's routing of POST / and /invocations, /info's model_type (reranker for one output),
// served_model_name and problem_type, the health routes and /embed_sparse's 424.
TEST(ServeClientsCli, ModelRoutingAndInfo) {
  TempDir tmp;
  init_tiny_model(tmp / "cross", "bert", 1);
  {
    ServeProcess server("--model " + st_model());
    ASSERT_TRUE(server.started()) << server.err();
    HttpClient client(server.port());
    const std::string body = R"({"inputs": ["a b", "c"], "normalize": false})";
    const HttpReply embed = client.post("/embed", body);
    ASSERT_EQ(embed.status, 200);
    for (const char* route : {"/", "/invocations"}) {
      const HttpReply r = client.post(route, body);
      ASSERT_EQ(r.status, 200) << r.body;
      EXPECT_TRUE(close(json::parse(r.body), json::parse(embed.body)));
    }
    const json info = json::parse(client.get("/info").body);
    EXPECT_TRUE(info["model_type"].contains("embedding")) << info;
    EXPECT_FALSE(info.contains("problem_type")) << info;
    EXPECT_EQ(info["served_model_name"], st_model());  // default: --model as given
    for (const char* health : {"/", "/ping", "/health"}) {
      const HttpReply r = client.get(health);
      EXPECT_EQ(r.status, 200) << health;
    }
    HttpReply r = client.post("/embed_sparse", R"({"inputs": "a"})");
    EXPECT_EQ(r.status, 424) << r.body;
    const json error = json::parse(r.body);
    EXPECT_EQ(error["error_type"], "backend");
    EXPECT_EQ(error["error"].get<std::string>().rfind(
                  "Backend error: Model is not an embedding model with SPLADE pooling", 0),
              0u)
        << r.body;
    r = client.post("/v1/embeddings", R"({"input": "a", "model": "other"})");
    EXPECT_EQ(json::parse(r.body)["model"], st_model());
  }
  {
    ServeProcess server("--model " + (tmp / "cross") + " --served-model-name my-reranker");
    ASSERT_TRUE(server.started()) << server.err();
    HttpClient client(server.port());
    const std::string body = R"({"query": "a b", "texts": ["c", "a b", "d e f"]})";
    const HttpReply rerank = client.post("/rerank", body);
    ASSERT_EQ(rerank.status, 200) << rerank.body;
    for (const char* route : {"/", "/invocations"}) {
      const HttpReply r = client.post(route, body);
      ASSERT_EQ(r.status, 200) << r.body;
      EXPECT_TRUE(close(json::parse(r.body), json::parse(rerank.body)));
    }
    const json info = json::parse(client.get("/info").body);
    ASSERT_TRUE(info["model_type"].contains("reranker")) << info;
    EXPECT_EQ(info["model_type"]["reranker"]["id2label"].size(), 1u);
    EXPECT_EQ(info["served_model_name"], "my-reranker");
    EXPECT_EQ(info["problem_type"], "regression");
  }
  {
    ServeProcess server("--model " + classifier_model());
    ASSERT_TRUE(server.started()) << server.err();
    HttpClient client(server.port());
    const std::string body = R"({"inputs": [["a b", "c"], "d"]})";
    const HttpReply predict = client.post("/predict", body);
    ASSERT_EQ(predict.status, 200) << predict.body;
    for (const char* route : {"/", "/invocations"}) {
      const HttpReply r = client.post(route, body);
      ASSERT_EQ(r.status, 200) << r.body;
      EXPECT_TRUE(close(json::parse(r.body), json::parse(predict.body)));
    }
    const json info = json::parse(client.get("/info").body);
    EXPECT_TRUE(info["model_type"].contains("classifier")) << info;
  }
  EXPECT_EQ(run_bertfit("serve --help").out.find("--served-model-name") != std::string::npos, true);
}

// The OpenAPI document lists exactly the routes served: each documented method and path is
// answered (never 404 or 405), each route TEI 1.9 serves is documented, other paths are 404 and
// other methods 405; /docs lists them; with an API key only the open routes answer without it.
TEST(ServeClientsCli, OpenApiDocumentIsTheRouteTable) {
  ServeProcess server("--model " + st_model() + " --api-key k3y");
  ASSERT_TRUE(server.started()) << server.err();
  HttpClient client(server.port());
  const HttpReply doc_reply = client.get("/api-doc/openapi.json");
  ASSERT_EQ(doc_reply.status, 200) << doc_reply.body;
  const json doc = json::parse(doc_reply.body);
  EXPECT_EQ(doc["openapi"].get<std::string>().rfind("3.", 0), 0u);
  std::set<std::pair<std::string, std::string>> documented;
  for (const auto& [path, ops] : doc["paths"].items()) {
    for (const auto& [method, op] : ops.items()) {
      documented.insert({method, path});
      std::string upper = method;
      for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      const bool needs_key = op.contains("security");
      // Served: answered with the key; a route needing it is 401 without.
      const HttpReply r =
          client.request(upper, path, upper == "POST" ? "{}" : "", {"Authorization: Bearer k3y"});
      EXPECT_NE(r.status, 404) << upper << " " << path;
      EXPECT_NE(r.status, 405) << upper << " " << path;
      const HttpReply anonymous = client.request(upper, path, upper == "POST" ? "{}" : "");
      EXPECT_EQ(anonymous.status == 401, needs_key) << upper << " " << path << anonymous.body;
      if (op.contains("requestBody")) {
        const std::string ref = op["requestBody"]["content"]["application/json"]["schema"]["$ref"];
        const std::string name = ref.substr(ref.rfind('/') + 1);
        EXPECT_TRUE(doc["components"]["schemas"].contains(name)) << ref;
      }
    }
  }
  // TEI 1.9's HTTP routes (router/src/http/server.rs, without the Vertex one) and bertfit's.
  const std::set<std::pair<std::string, std::string>> tei = {{"post", "/embed"},
                                                             {"post", "/embed_all"},
                                                             {"post", "/embed_sparse"},
                                                             {"post", "/predict"},
                                                             {"post", "/rerank"},
                                                             {"post", "/similarity"},
                                                             {"post", "/tokenize"},
                                                             {"post", "/decode"},
                                                             {"post", "/embeddings"},
                                                             {"post", "/v1/embeddings"},
                                                             {"get", "/info"},
                                                             {"get", "/health"},
                                                             {"get", "/"},
                                                             {"get", "/ping"},
                                                             {"get", "/metrics"},
                                                             {"post", "/"},
                                                             {"post", "/invocations"},
                                                             {"get", "/api-doc/openapi.json"},
                                                             {"get", "/docs"}};
  EXPECT_EQ(documented, tei);
  EXPECT_EQ(client.get("/nothing", {"Authorization: Bearer k3y"}).status, 404);
  EXPECT_EQ(client.request("PUT", "/embed", "", {"Authorization: Bearer k3y"}).status, 405);
  EXPECT_EQ(client.post("/ping", "{}").status, 405);
  const HttpReply docs = client.get("/docs");
  ASSERT_EQ(docs.status, 200);
  EXPECT_EQ(docs.headers.at("content-type"), "text/html; charset=utf-8");
  for (const auto& [method, path] : documented) {
    EXPECT_NE(docs.body.find("<code>" + path + "</code>"), std::string::npos) << path;
  }
}

// TEI's metric names beside bertfit's, each family with one # TYPE line before its samples.
TEST(ServeClientsCli, TeiMetricNames) {
  ServeProcess server("--model " + st_model());
  ASSERT_TRUE(server.started()) << server.err();
  HttpClient client(server.port());
  ASSERT_EQ(client.post("/embed", R"({"inputs": "a"})").status, 200);
  ASSERT_EQ(client.post("/embed", R"({"inputs": ["a", "b c"]})").status, 200);
  ASSERT_EQ(client.post("/predict", R"({"inputs": "a"})").status, 424);
  const std::string m = client.get("/metrics").body;
  for (const char* line :
       {"te_request_count{method=\"single\"} 1", "te_request_count{method=\"batch\"} 1",
        "te_request_success{method=\"single\"} 1", "te_request_failure{err=\"model_type\"} 1",
        "te_embed_count 3", "te_embed_success 3", "te_request_duration_count 2",
        "te_embed_duration_count 3", "te_request_input_length_count 3", "te_queue_size 0",
        "bertfit_requests_total{route=\"/embed\""}) {
    EXPECT_NE(m.find(line), std::string::npos) << line << "\n" << m;
  }
  for (const char* name :
       {"te_request_tokenization_duration_bucket", "te_request_queue_duration_bucket",
        "te_request_inference_duration_bucket", "te_batch_next_size_bucket",
        "te_batch_next_tokens_bucket"}) {
    EXPECT_NE(m.find(name), std::string::npos) << name;
  }
  // Exposition format: one TYPE per family, before its samples; histograms end with +Inf.
  std::set<std::string> typed;
  std::istringstream in(m);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# TYPE ", 0) == 0) {
      const std::string family = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_TRUE(typed.insert(family).second) << "two TYPE lines for " << family;
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    std::string name = line.substr(0, line.find_first_of("{ "));
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string s = suffix;
      if (!typed.count(name) && name.size() > s.size() &&
          name.compare(name.size() - s.size(), s.size(), s) == 0) {
        name.resize(name.size() - s.size());
      }
    }
    EXPECT_TRUE(typed.count(name)) << "no TYPE before " << line;
  }
}

}  // namespace
}  // namespace bertfit::testing
