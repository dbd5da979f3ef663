// `bertfit serve` through the binary, over loopback with a plain-socket HTTP/1.1 client: every
// route and error status, pairs, batches, truncation both ways, the bearer key, answers that
// equal `bertfit predict`'s (also from 16 concurrent clients), malformed, oversized, stalled and
// abandoned requests after which the server still answers, an idle server's CPU, and a graceful
// shutdown with requests in flight.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "cli_util.h"
#include "serve_client.h"

namespace bertfit::testing {
namespace {

using nlohmann::json;

// Scores are compared to `bertfit predict`'s with this bound. The two run the same fp32 forward
// on the same token ids; only the batch differs (its composition, padded length and packed row
// count), which can change the order of oneDNN's and attention's float sums: each logit may move
// by a few ulps of the sums' terms, far below 1e-5 for a model whose logits are O(1); the
// softmax/sigmoid in double does not add to it.
constexpr double kTol = 1e-5;

std::string sizes(const std::string& arch) {
  return arch == "distilbert" ? "--set n_layers=2 --set dim=32 --set hidden_dim=64 --set n_heads=2"
                              : "--set num_hidden_layers=2 --set hidden_size=32 "
                                "--set intermediate_size=64 --set num_attention_heads=2";
}

// The three kinds of model, made once for the suite.
struct Models {
  TempDir tmp;
  std::string single, multi, regression;
  Models() {
    single = tmp / "single";
    multi = tmp / "multi";
    regression = tmp / "regression";
    init_tiny_model(single, "distilbert", 2);
    RunResult r = run_bertfit("init --arch bert --output " + multi + " " + sizes("bert") +
                              " --num-labels 3 --set problem_type=multi_label_classification "
                              "--seed 11");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    init_tiny_model(regression, "bert", 1);
  }
};

Models& models() {
  static Models m;  // made by the first test that needs it, removed at exit
  return m;
}

json parse(const std::string& body) { return json::parse(body); }

// A text of n words, alternating from a small set, so that token counts are exact.
std::string words(int n, const std::string& word = "apple") {
  std::string s;
  for (int i = 0; i < n; ++i) s += (i > 0 ? " " : "") + word;
  return s;
}

struct Input {
  std::string a;
  std::string b;  // empty: a single text
};

// `bertfit predict`'s line for each input (one run per kind: single texts, pairs).
std::vector<json> predict_lines(const std::string& model, const std::vector<Input>& inputs,
                                const std::string& extra = "") {
  TempDir tmp;
  std::vector<json> out(inputs.size());
  for (bool pairs : {false, true}) {
    std::vector<std::size_t> index;
    std::string file;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].b.empty() == pairs) continue;
      index.push_back(i);
      json row{{"a", inputs[i].a}};
      if (pairs) row["b"] = inputs[i].b;
      file += row.dump() + "\n";
    }
    if (index.empty()) continue;
    write_text(tmp / "in.jsonl", file);
    RunResult r = run_bertfit("predict --model " + model + " --input " + (tmp / "in.jsonl") +
                              " --text-a-column a --max-seq-len 512 " +
                              (pairs ? "--text-b-column b " : "") + extra);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::istringstream lines(r.out);
    std::size_t k = 0;
    for (std::string line; std::getline(lines, line) && k < index.size(); ++k) {
      out[index[k]] = json::parse(line);
    }
    EXPECT_EQ(k, index.size());
  }
  return out;
}

// The server's answer to one input as label -> score; checks the order (descending scores).
std::map<std::string, double> scores_of(const json& answer) {
  std::map<std::string, double> m;
  double last = INFINITY;
  for (const json& p : answer) {
    const double s = p.at("score").get<double>();
    EXPECT_LE(s, last) << answer.dump();
    last = s;
    m[p.at("label").get<std::string>()] = s;
  }
  return m;
}

// Checks one server answer against predict's line for the model's problem type.
void expect_same(const json& answer, const json& line, const std::string& kind) {
  auto s = scores_of(answer);
  if (kind == "single") {
    ASSERT_EQ(s.size(), 2u) << answer.dump();
    for (int k = 0; k < 2; ++k) {
      EXPECT_NEAR(s.at("LABEL_" + std::to_string(k)), line["probabilities"][k].get<double>(), kTol);
    }
  } else if (kind == "multi") {
    ASSERT_EQ(s.size(), 3u);
    for (const auto& [label, p] : line["probabilities"].items()) {
      EXPECT_NEAR(s.at(label), p.get<double>(), kTol) << label;
    }
  } else {
    ASSERT_EQ(s.size(), 1u);
    EXPECT_NEAR(s.begin()->second, line["score"].get<double>(), kTol);
  }
}

std::string predict_body(const std::vector<Input>& inputs, bool batch,
                         const std::string& extra = "") {
  json list = json::array();
  for (const Input& in : inputs) {
    list.push_back(in.b.empty() ? json::array({in.a}) : json::array({in.a, in.b}));
  }
  json body;
  if (batch) {
    body["inputs"] = list;
  } else {
    body["inputs"] = inputs[0].b.empty() ? json(inputs[0].a) : list[0];
  }
  std::string s = body.dump();
  if (!extra.empty()) s = s.substr(0, s.size() - 1) + "," + extra + "}";
  return s;
}

const std::vector<Input>& sample_inputs() {
  static const std::vector<Input> inputs = {
      {"the cat sat on the mat", ""},
      {"a completely different sentence, with punctuation!", ""},
      {"is this a question?", "yes it is a question."},
      {"short", "pair"},
      {"Ünïcode àccents and 漢字", ""},
  };
  return inputs;
}

const char* kFast = " --max-batch-tokens 4096 --tokenization-workers 2";

TEST(ServeCli, PredictAnswersEqualPredictCommandForEveryProblemType) {
  for (const std::string kind : {"single", "multi", "regression"}) {
    SCOPED_TRACE(kind);
    const std::string model = kind == "single"  ? models().single
                              : kind == "multi" ? models().multi
                                                : models().regression;
    ServeProcess server("--model " + model + kFast);
    ASSERT_TRUE(server.started());
    HttpClient client(server.port());
    const auto& inputs = sample_inputs();
    const auto lines = predict_lines(model, inputs);
    // One by one, on every predict route: a text, or a pair. A one-output model is a reranker
    // (TEI's model type), whose POST / and /invocations mean /rerank (serve_clients_cli_test).
    const std::vector<const char*> routes =
        kind == "regression" ? std::vector<const char*>{"/predict"}
                             : std::vector<const char*>{"/predict", "/", "/invocations"};
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      for (const char* route : routes) {
        HttpReply r = client.post(route, predict_body({inputs[i]}, false));
        ASSERT_EQ(r.status, 200) << r.body;
        EXPECT_EQ(r.headers["content-type"], "application/json");
        for (const char* h : {"x-compute-time", "x-tokenization-time", "x-queue-time",
                              "x-inference-time", "x-total-time"}) {
          EXPECT_EQ(r.headers.count(h), 1u) << h;
        }
        expect_same(parse(r.body), lines[i], kind);
      }
    }
    // As one batch: a list of answers in input order.
    HttpReply r = client.post("/predict", predict_body(inputs, true));
    ASSERT_EQ(r.status, 200) << r.body;
    json answers = parse(r.body);
    ASSERT_EQ(answers.size(), inputs.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) expect_same(answers[i], lines[i], kind);
    // raw_scores: the logits; for single-label their softmax is the score.
    r = client.post("/predict", predict_body({inputs[0]}, false, R"("raw_scores": true)"));
    ASSERT_EQ(r.status, 200) << r.body;
    auto raw = scores_of(parse(r.body));
    if (kind == "single") {
      const double l0 = raw.at("LABEL_0"), l1 = raw.at("LABEL_1");
      EXPECT_NEAR(1.0 / (1.0 + std::exp(l1 - l0)), lines[0]["probabilities"][0].get<double>(),
                  kTol);
    } else if (kind == "multi") {
      for (const auto& [label, p] : lines[0]["probabilities"].items()) {
        EXPECT_NEAR(1.0 / (1.0 + std::exp(-raw.at(label))), p.get<double>(), kTol);
      }
    } else {
      EXPECT_NEAR(raw.begin()->second, lines[0]["score"].get<double>(), kTol);
    }
    EXPECT_EQ(server.stop(SIGTERM), 0) << server.err();
  }
}

// --precision bf16 and int8 answer as `bertfit predict` does in the same precision; --threads,
// --host and --max-batch-requests reach the server.
TEST(ServeCli, PrecisionThreadsHostAndBatchRequests) {
  const std::string model = models().single;
  const auto& inputs = sample_inputs();
  // Bounds: in int8 both sides quantize each row on its own, with the same integer sums, so only
  // fp32 sums whose order depends on the batch (attention, LayerNorm) differ: a few ulps, as in
  // fp32. In bf16 such a difference can flip the rounding of an activation to bf16 (a relative
  // step of 2^-8) somewhere in the network; through two small layers that moves a probability
  // by at most ~1e-3, against probabilities of O(0.5).
  for (const auto& [precision, dtype, tol] :
       {std::tuple{"int8", "int8", 1e-4}, std::tuple{"bf16", "bfloat16", 2e-3}}) {
    SCOPED_TRACE(precision);
    ServeProcess server("--model " + model + kFast + " --precision " + precision +
                        " --threads 1 --host 127.0.0.1 --max-batch-requests 2");
    ASSERT_TRUE(server.started());
    HttpClient client(server.port());
    HttpReply r = client.get("/info");
    ASSERT_EQ(r.status, 200);
    EXPECT_EQ(parse(r.body)["model_dtype"], dtype);
    const auto lines =
        predict_lines(model, inputs, std::string("--threads 1 --precision ") + precision);
    r = client.post("/predict", predict_body(inputs, true));
    ASSERT_EQ(r.status, 200) << r.body;
    json answers = parse(r.body);
    ASSERT_EQ(answers.size(), inputs.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      auto s = scores_of(answers[i]);
      for (int k = 0; k < 2; ++k) {
        EXPECT_NEAR(s.at("LABEL_" + std::to_string(k)), lines[i]["probabilities"][k].get<double>(),
                    tol);
      }
    }
    // Five inputs with at most two per batch (besides /health's and warm-up's): every batch
    // held 2 or fewer.
    const std::string metrics = client.get("/metrics").body;
    auto value = [&](const std::string& name) {
      const auto at = metrics.find(name);
      EXPECT_NE(at, std::string::npos) << name;
      return at == std::string::npos ? -1L : std::atol(metrics.c_str() + at + name.size());
    };
    const long batches = value("bertfit_batch_size_count ");
    EXPECT_GE(batches, 3);
    EXPECT_EQ(value("bertfit_batch_size_bucket{le=\"2\"} "), batches);
    EXPECT_EQ(server.stop(SIGTERM), 0) << server.err();
  }
}

// Flags out of range are refused before anything listens, naming the flag.
TEST(ServeCli, BadFlagsAreRefused) {
  const std::string model = "serve --model " + models().single;
  for (const auto& [args, needle] : std::vector<std::pair<std::string, std::string>>{
           {" --port 70000", "--port"},
           {" --max-batch-tokens 100", "--max-batch-tokens"},
           {" --max-client-batch-size 0", "--max-client-batch-size"},
           {" --read-timeout 0", "--read-timeout"},
           {" --host 256.1.1.1 --port 0", "256.1.1.1"},
           {" --precision fp64", "--precision"}}) {
    RunResult r = run_bertfit(model + args);
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_NE(r.err.find(needle), std::string::npos) << args << ": " << r.err;
  }
  RunResult r = run_bertfit("serve --port 0");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--model"), std::string::npos) << r.err;
  // A Hub repository id and --revision reach the Hub resolution: offline, with an empty cache,
  // the message names both (hub_cli_test runs the resolution itself against its emulator).
  TempDir hf;
  ::setenv("HF_HOME", (hf / "home").c_str(), 1);
  ::setenv("HF_HUB_OFFLINE", "1", 1);
  r = run_bertfit("serve --port 0 --model someorg/somemodel --revision v2");
  ::unsetenv("HF_HOME");
  ::unsetenv("HF_HUB_OFFLINE");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("'someorg/somemodel' at revision 'v2'"), std::string::npos) << r.err;
}

TEST(ServeCli, TruncationBothWaysAndTheLengthLimit) {
  const std::string model = models().single;
  ServeProcess server("--model " + model + kFast);
  ASSERT_TRUE(server.started());
  HttpClient client(server.port());
  // 300 + 300 one-token words: 602 tokens with [CLS] and [SEP], over 512.
  const std::string text = words(300, "apple") + " " + words(300, "banana");
  HttpReply r = client.post("/predict", json{{"inputs", text}}.dump());
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_EQ(parse(r.body)["error_type"], "validation");
  // Right (the default direction) keeps the first 510 words, as `bertfit predict` cuts; left the
  // last 510.
  const auto lines =
      predict_lines(model, {{text, ""}, {words(210, "apple") + " " + words(300, "banana"), ""}});
  r = client.post("/predict", json{{"inputs", text}, {"truncate", true}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  expect_same(parse(r.body), lines[0], "single");
  const double right = scores_of(parse(r.body)).at("LABEL_0");
  r = client.post(
      "/predict",
      json{{"inputs", text}, {"truncate", true}, {"truncation_direction", "left"}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  expect_same(parse(r.body), lines[1], "single");
  EXPECT_NE(scores_of(parse(r.body)).at("LABEL_0"), right);  // the two cuts differ
  // A pair is cut longest first, in the batch too.
  json pair_batch = json::array({json::array({words(400), words(300, "banana")})});
  r = client.post("/predict", json{{"inputs", pair_batch}, {"truncate", true}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(parse(r.body).size(), 1u);
  EXPECT_EQ(server.stop(SIGTERM), 0);
  // --auto-truncate makes truncation the default; a request can still refuse it.
  ServeProcess auto_server("--model " + model + kFast + " --auto-truncate");
  ASSERT_TRUE(auto_server.started());
  HttpClient c2(auto_server.port());
  r = c2.post("/predict", json{{"inputs", text}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  expect_same(parse(r.body), lines[0], "single");
  EXPECT_EQ(c2.post("/predict", json{{"inputs", text}, {"truncate", false}}.dump()).status, 422);
}

TEST(ServeCli, HealthInfoTokenizeMetrics) {
  const std::string model = models().multi;
  ServeProcess server("--model " + model + kFast + " --max-client-batch-size 3");
  ASSERT_TRUE(server.started());
  HttpClient client(server.port());
  EXPECT_EQ(client.get("/health").status, 200);
  HttpReply r = client.get("/info");
  ASSERT_EQ(r.status, 200) << r.body;
  json info = parse(r.body);
  EXPECT_EQ(info["model_id"], model);
  EXPECT_EQ(info["model_dtype"], "float32");
  EXPECT_EQ(info["max_input_length"], 512);
  EXPECT_EQ(info["max_client_batch_size"], 3);
  EXPECT_EQ(info["max_batch_tokens"], 4096);
  EXPECT_EQ(info["problem_type"], "multi_label_classification");
  EXPECT_EQ(info["model_type"]["classifier"]["id2label"].size(), 3u);
  EXPECT_FALSE(info["version"].get<std::string>().empty());
  // The sha256 of the weights file, as sha256sum computes it.
  FILE* p = ::popen(("sha256sum " + model + "/model.safetensors").c_str(), "r");
  char sum[65] = {};
  ASSERT_EQ(std::fread(sum, 1, 64, p), 64u);
  ::pclose(p);
  EXPECT_EQ(info["weights_sha256"], std::string(sum));

  r = client.post("/tokenize", R"({"inputs": ["Hello, world!", "unaffable"]})");
  ASSERT_EQ(r.status, 200) << r.body;
  json tokens = parse(r.body);
  ASSERT_EQ(tokens.size(), 2u);
  std::vector<std::string> texts;
  for (const json& t : tokens[0]) texts.push_back(t["text"]);
  EXPECT_EQ(texts, (std::vector<std::string>{"[CLS]", "hello", ",", "world", "!", "[SEP]"}));
  EXPECT_TRUE(tokens[0][0]["special"].get<bool>());
  EXPECT_FALSE(tokens[0][1]["special"].get<bool>());
  EXPECT_EQ(tokens[0][1]["id"], 7592);  // bert-base-uncased's "hello"
  // Character offsets of each token in its input; null for [CLS] and [SEP].
  std::vector<json> starts, stops;
  for (const json& t : tokens[0]) {
    starts.push_back(t["start"]);
    stops.push_back(t["stop"]);
  }
  EXPECT_EQ(starts, (std::vector<json>{nullptr, 0, 5, 7, 12, nullptr}));
  EXPECT_EQ(stops, (std::vector<json>{nullptr, 5, 6, 12, 13, nullptr}));
  r = client.post("/tokenize", R"({"inputs": "unaffable", "add_special_tokens": false})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(parse(r.body)[0][0]["text"], "una");
  EXPECT_EQ(parse(r.body)[0][1]["start"], 3);  // "##ffa"
  EXPECT_EQ(parse(r.body)[0][1]["stop"], 6);

  r = client.get("/metrics");
  ASSERT_EQ(r.status, 200);
  for (const char* name : {"bertfit_requests_total{route=\"/tokenize\",status=\"200\"} 2",
                           "bertfit_queue_seconds_bucket", "bertfit_inference_seconds_count",
                           "bertfit_tokenization_seconds_sum", "bertfit_batch_size_bucket",
                           "bertfit_batch_tokens_count", "bertfit_input_tokens_bucket"}) {
    EXPECT_NE(r.body.find(name), std::string::npos) << name << "\n" << r.body;
  }
  // Unknown routes and wrong methods.
  EXPECT_EQ(client.get("/nothing").status, 404);
  EXPECT_EQ(client.get("/predict").status, 405);
  EXPECT_EQ(client.post("/health", "{}").status, 405);
}

TEST(ServeCli, BearerKey) {
  ServeProcess server("--model " + models().single + kFast + " --api-key s3cret");
  ASSERT_TRUE(server.started());
  HttpClient client(server.port());
  const std::string body = R"({"inputs": "hello"})";
  HttpReply r = client.post("/predict", body);
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(parse(r.body)["error_type"], "unauthorized");
  EXPECT_EQ(client.post("/predict", body, {"Authorization: Bearer wrong"}).status, 401);
  EXPECT_EQ(client.post("/predict", body, {"Authorization: Bearer s3cret!"}).status, 401);
  EXPECT_EQ(client.post("/predict", body, {"Authorization: s3cret"}).status, 401);
  EXPECT_EQ(client.post("/predict", body, {"Authorization: Bearer s3cret"}).status, 200);
  EXPECT_EQ(client.get("/info").status, 401);
  EXPECT_EQ(client.get("/info", {"Authorization: Bearer s3cret"}).status, 200);
  EXPECT_EQ(client.post("/tokenize", body).status, 401);
  // /health and /metrics stay open.
  EXPECT_EQ(client.get("/health").status, 200);
  EXPECT_EQ(client.get("/metrics").status, 200);
}

// After each bad request, a good one still gets the right answer.
class ServeRobustness : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<ServeProcess>("--model " + models().single + kFast +
                                             " --read-timeout 1 --idle-timeout 2");
    ASSERT_TRUE(server_->started());
    expected_ = predict_lines(models().single, {sample_inputs()[0]})[0];
  }
  void expect_still_answers() {
    HttpClient client(server_->port());
    HttpReply r = client.post("/predict", predict_body({sample_inputs()[0]}, false));
    ASSERT_EQ(r.status, 200) << r.body;
    expect_same(parse(r.body), expected_, "single");
  }
  std::unique_ptr<ServeProcess> server_;
  json expected_;
};

TEST_F(ServeRobustness, BadBodies) {
  HttpClient client(server_->port());
  auto status = [&](const std::string& body) {
    HttpReply r = client.post("/predict", body);
    if (r.status >= 400) {
      json e = parse(r.body);
      EXPECT_TRUE(e.contains("error") && e.contains("error_type")) << r.body;
    }
    return r.status;
  };
  EXPECT_EQ(status("{\"inputs\": [\"a\""), 400);
  EXPECT_EQ(status("not json"), 400);
  EXPECT_EQ(status(""), 400);
  EXPECT_EQ(status(R"({"inputs": {"text": "a"}})"), 400);
  EXPECT_EQ(status(R"({"inputs": [1, 2]})"), 400);
  EXPECT_EQ(status(R"({"inputs": "a", "raw_scores": 1})"), 400);
  EXPECT_EQ(status(R"({"inputs": []})"), 400);
  EXPECT_EQ(status("{\"inputs\": \"caf\xe9\"}"), 422);  // Latin-1, not UTF-8
  json big = json::array();
  for (int i = 0; i < 33; ++i) big.push_back("x");
  EXPECT_EQ(status(json{{"inputs", big}}.dump()), 413);  // over --max-client-batch-size 32
  big.erase(big.begin());
  EXPECT_EQ(status(json{{"inputs", big}}.dump()), 200);
  expect_still_answers();
}

TEST_F(ServeRobustness, OversizedBodyAndHeaders) {
  {
    HttpClient client(server_->port());
    const std::string body = json{{"inputs", std::string(3 << 20, 'a')}}.dump();
    HttpReply r = client.post("/predict", body);
    EXPECT_EQ(r.status, 413) << r.body;
  }
  {
    HttpClient client(server_->port());
    std::vector<std::string> headers;
    for (int i = 0; i < 5000; ++i) headers.push_back("X-Filler-" + std::to_string(i) + ": abc");
    HttpReply r = client.post("/predict", R"({"inputs": "a"})", headers);
    EXPECT_EQ(r.status, 431);
  }
  expect_still_answers();
}

TEST_F(ServeRobustness, StalledAndAbandonedRequests) {
  // Stalls mid-body: the server closes the connection after --read-timeout (1 s) without an
  // answer, and meanwhile answers others.
  HttpClient staller(server_->port());
  ASSERT_TRUE(staller.send_raw(
      "POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"inputs\":"));
  // Stalls mid-header.
  HttpClient header_staller(server_->port());
  ASSERT_TRUE(header_staller.send_raw("POST /predict HTTP/1.1\r\nHost: x\r\nContent-Le"));
  expect_still_answers();
  EXPECT_TRUE(staller.closed_by_server(5000));
  EXPECT_TRUE(header_staller.closed_by_server(5000));
  // Hangs up mid-request.
  for (int i = 0; i < 5; ++i) {
    HttpClient quitter(server_->port());
    ASSERT_TRUE(quitter.send_raw(
        "POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"inputs\": \"a"));
    quitter.close();
  }
  // Garbage instead of HTTP: 400, then the connection closes.
  HttpClient garbage(server_->port());
  ASSERT_TRUE(garbage.send_raw("\x01\x02 nonsense\r\n\r\n"));
  EXPECT_EQ(garbage.read_reply().status, 400);
  // A silent connection is closed after --idle-timeout (2 s).
  HttpClient silent(server_->port());
  ASSERT_TRUE(silent.send_raw(""));
  EXPECT_TRUE(silent.closed_by_server(6000));
  expect_still_answers();
}

TEST(ServeCli, ConcurrentClientsGetPredictsAnswers) {
  const std::string model = models().single;
  ServeProcess server("--model " + model + kFast);
  ASSERT_TRUE(server.started());
  // 16 clients × 50 requests, each of one input or a small batch, over keep-alive connections.
  std::vector<Input> inputs;
  for (int i = 0; i < 40; ++i) {
    inputs.push_back({words(1 + i % 13, i % 2 ? "apple" : "tree") + " number " + std::to_string(i),
                      i % 3 == 0 ? "and a pair " + std::to_string(i) : ""});
  }
  const auto lines = predict_lines(model, inputs);
  std::atomic<int> ok{0}, bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      HttpClient client(server.port());
      for (int k = 0; k < 50; ++k) {
        const std::size_t first = (t * 7 + k * 3) % inputs.size();
        const std::size_t n = k % 5 == 0 ? 3 : 1;
        std::vector<Input> chosen;
        for (std::size_t j = 0; j < n; ++j) chosen.push_back(inputs[(first + j) % inputs.size()]);
        HttpReply r = client.post("/predict", predict_body(chosen, n > 1));
        if (r.status != 200) {
          ++bad;
          continue;
        }
        json answer = parse(r.body);
        for (std::size_t j = 0; j < n; ++j) {
          expect_same(n > 1 ? answer[j] : answer, lines[(first + j) % inputs.size()], "single");
        }
        ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok, 800);
  EXPECT_EQ(bad, 0);
  // The batcher did batch: some batch held more than one sequence.
  HttpClient client(server.port());
  const std::string metrics = client.get("/metrics").body;
  const auto at = metrics.find("bertfit_batch_size_bucket{le=\"1\"} ");
  ASSERT_NE(at, std::string::npos);
  const long singles = std::atol(metrics.c_str() + metrics.find("} ", at) + 2);
  const auto count_at = metrics.find("bertfit_batch_size_count ");
  const long batches = std::atol(metrics.c_str() + count_at + 25);
  EXPECT_LT(singles, batches) << metrics;
  EXPECT_EQ(server.stop(SIGTERM), 0);
}

TEST(ServeCli, OverloadIsRefusedWith429) {
  ServeProcess server("--model " + models().single + kFast + " --max-concurrent-requests 1");
  ASSERT_TRUE(server.started());
  // Batches of 32 inputs of 500 tokens keep the one place busy long enough for others to
  // collide with it; every answer is 200 or 429, and some are 429.
  json inputs = json::array();
  for (int i = 0; i < 32; ++i) inputs.push_back(words(500, i % 2 ? "apple" : "banana"));
  const std::string body = json{{"inputs", inputs}}.dump();
  std::atomic<int> ok{0}, overloaded{0}, other{0};
  for (int round = 0; round < 10 && overloaded == 0; ++round) {
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&] {
        HttpClient client(server.port());
        HttpReply r = client.post("/predict", body);
        if (r.status == 200) {
          ++ok;
        } else if (r.status == 429 && parse(r.body)["error_type"] == "overloaded") {
          ++overloaded;
        } else {
          ++other;
        }
      });
    }
    for (auto& t : threads) t.join();
  }
  EXPECT_GT(overloaded, 0);
  EXPECT_GT(ok, 0);
  EXPECT_EQ(other, 0);
}

TEST(ServeCli, IdleServerUsesNoCpu) {
  ServeProcess server("--model " + models().single + kFast);
  ASSERT_TRUE(server.started());
  HttpClient client(server.port());
  ASSERT_EQ(client.post("/predict", R"({"inputs": "warm"})").status, 200);
  client.close();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // OpenMP threads stop spinning
  const long before = cpu_ticks(server.pid());
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const long used = cpu_ticks(server.pid()) - before;
  // Clock ticks (1/100 s here): an idle server sleeps; 2 ticks allow for accounting noise.
  EXPECT_LE(used, 2) << "an idle server used " << used << " ticks in 2 s";
}

TEST(ServeCli, SigtermAnswersRequestsInFlightAndExitsZero) {
  // Room in the queue for all six batches (6 x 32 x ~416 tokens).
  ServeProcess server("--model " + models().single + kFast + " --max-queued-tokens 100000");
  ASSERT_TRUE(server.started());
  json inputs = json::array();
  for (int i = 0; i < 32; ++i) inputs.push_back(words(400 + i, i % 2 ? "apple" : "banana"));
  const std::string body = json{{"inputs", inputs}}.dump();
  // Connections that are open and have answered once, then each sends a large batch; SIGTERM
  // arrives while they are queued or computing.
  std::vector<std::unique_ptr<HttpClient>> clients;
  for (int i = 0; i < 6; ++i) {
    clients.push_back(std::make_unique<HttpClient>(server.port()));
    ASSERT_EQ(clients.back()->get("/health").status, 200);
  }
  HttpClient idle(server.port());
  ASSERT_EQ(idle.get("/health").status, 200);
  for (auto& c : clients) {
    ASSERT_TRUE(c->send_raw("POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                            std::to_string(body.size()) + "\r\n\r\n" + body));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ::kill(server.pid(), SIGTERM);
  for (auto& c : clients) {
    HttpReply r = c->read_reply();
    EXPECT_EQ(r.status, 200) << r.body;
    if (r.status == 200) {
      EXPECT_EQ(parse(r.body).size(), 32u);
    }
  }
  // The idle connection is closed; new connections are refused; the exit code is 0.
  EXPECT_TRUE(idle.closed_by_server(5000));
  EXPECT_EQ(server.stop(0), 0) << server.err();
  HttpClient late(server.port());
  EXPECT_EQ(late.get("/health").status, 0);
}

}  // namespace
}  // namespace bertfit::testing
