// `bertfit serve` under attack, through the binary over loopback: connection floods (idle
// connections reaped first, new clients answered; descriptor exhaustion itself is in
// serve_descriptor_cli_test.cc), bounded /tokenize, request
// smuggling through Transfer-Encoding, NUL bytes in a body, the queue's token budget and deadline,
// /health never waiting behind inference, every refusal and timeout in /metrics, timers that must
// be finite, the API key from a file or the environment, and a shutdown that does not wait for a
// slow client.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cli_util.h"
#include "serve_client.h"

namespace bertfit::testing {
namespace {

using nlohmann::json;
using namespace std::string_literals;

const char* kFast = " --max-batch-tokens 4096 --tokenization-workers 2";

// A tiny model for most tests, and a larger one whose batches take long enough (tens of ms) for
// a queue to stay full while a test looks at it.
struct Models {
  TempDir tmp;
  std::string tiny = tmp / "tiny", medium = tmp / "medium";
  Models() {
    init_tiny_model(tiny, "distilbert", 2);
    RunResult r = run_bertfit("init --arch distilbert --output " + medium +
                              " --set n_layers=4 --set dim=256 --set hidden_dim=1024 "
                              "--set n_heads=4 --seed 3");
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
};

Models& models() {
  static Models m;
  return m;
}

std::string words(int n, const std::string& word = "apple") {
  std::string s;
  for (int i = 0; i < n; ++i) s += (i > 0 ? " " : "") + word;
  return s;
}

std::string batch_body(int inputs, int words_each) {
  json list = json::array();
  for (int i = 0; i < inputs; ++i) list.push_back(words(words_each, i % 2 ? "apple" : "tree"));
  return json{{"inputs", list}}.dump();
}

std::string raw_post(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

void expect_answers(int port) {
  HttpClient client(port);
  HttpReply r = client.post("/predict", R"({"inputs": "still here"})");
  EXPECT_EQ(r.status, 200) << r.body;
}

// Under the default --max-connections (what `ulimit -n` leaves), a flood never reaches EMFILE: a
// new connection replaces the one idle the longest, so a client is answered during the flood.
TEST(ServeAttack, ConnectionLimitReapsIdleConnectionsFirst) {
  ServeProcess server("--model " + models().tiny + kFast, ServeSetup{128, {}});
  ASSERT_TRUE(server.started());
  std::vector<int> flood;
  for (int i = 0; i < 150; ++i) {
    const int fd = open_idle_connection(server.port());
    if (fd >= 0) flood.push_back(fd);
  }
  expect_answers(server.port());  // while the flood is still open
  HttpClient client(server.port());
  const std::string m = client.get("/metrics").body;
  EXPECT_GT(metric_value(m, "bertfit_rejections_total{reason=\"reaped_idle\",status=\"none\"}"), 0)
      << m;
  EXPECT_EQ(server.err().find("Too many open files"), std::string::npos) << server.err();
  for (int fd : flood) ::close(fd);
  // A cap of one connection: a second client replaces the first while it is idle.
  ServeProcess one("--model " + models().tiny + kFast + " --max-connections 1");
  ASSERT_TRUE(one.started());
  HttpClient first(one.port()), second(one.port());
  EXPECT_EQ(first.get("/health").status, 200);
  // The first connection turns idle once its answer is written, which the client may see
  // before the server has gone back to waiting: until then the second is closed at once (none
  // idle). So it tries again, up to 2 s.
  int status = 0;
  for (int attempt = 0; attempt < 40 && status != 200; ++attempt) {
    status = second.get("/health").status;
    if (status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(status, 200);
  EXPECT_TRUE(first.closed_by_server(5000));
}

TEST(ServeAttack, TokenizeIsBoundedAndCountedAgainstTheConcurrencyLimit) {
  ServeProcess server("--model " + models().tiny + kFast);
  ASSERT_TRUE(server.started());
  HttpClient client(server.port());
  // 1.9 M one-character tokens in a 1.9 MB body: refused, not answered with 120 MB.
  HttpReply r = client.post("/tokenize", json{{"inputs", std::string(1900000, '!')}}.dump());
  EXPECT_EQ(r.status, 413) << r.body.substr(0, 200);
  EXPECT_NE(r.body.find("--max-batch-tokens"), std::string::npos) << r.body;
  // Up to the budget (4096 with [CLS] and [SEP]) is answered.
  r = client.post("/tokenize", json{{"inputs", std::string(4094, '!')}}.dump());
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)[0].size(), 4096u);
  EXPECT_EQ(client.post("/tokenize", json{{"inputs", std::string(4095, '!')}}.dump()).status, 413);
  // With one place, a /tokenize arriving while a /predict holds it is refused with 429.
  ServeProcess busy("--model " + models().medium + kFast +
                    " --max-concurrent-requests 1 --max-batch-requests 1");
  ASSERT_TRUE(busy.started());
  int refused = 0;
  for (int round = 0; round < 10 && refused == 0; ++round) {
    HttpClient predictor(busy.port()), tokenizer(busy.port());
    ASSERT_TRUE(predictor.send_raw(raw_post("/predict", batch_body(8, 400))));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    HttpReply t = tokenizer.post("/tokenize", R"({"inputs": "hello"})");
    if (t.status == 429) ++refused;
    EXPECT_TRUE(t.status == 200 || t.status == 429) << t.status << " " << t.body;
    EXPECT_EQ(predictor.read_reply().status, 200);
  }
  EXPECT_GT(refused, 0);
}

// RFC 9112 §6.1: a Transfer-Encoding other than exactly `chunked` is a 400 and the connection
// closes, so what follows is never read as a request.
TEST(ServeAttack, RequestSmugglingThroughTransferEncodingIsRefused) {
  ServeProcess server("--model " + models().tiny + kFast);
  ASSERT_TRUE(server.started());
  const std::string smuggled = "GET /info HTTP/1.1\r\nHost: x\r\n\r\n";
  for (const std::string te : {"xchunked", "chunked, identity", "chunked, gzip", "gzip"}) {
    HttpClient client(server.port());
    ASSERT_TRUE(client.send_raw("POST /predict HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: " + te +
                                "\r\n\r\n" + smuggled));
    HttpReply r = client.read_reply();
    EXPECT_EQ(r.status, 400) << te;
    EXPECT_EQ(client.read_reply().status, 0) << te << ": a second answer";
  }
  // chunked beside Content-Length (Beast itself refuses it as malformed).
  HttpClient client(server.port());
  ASSERT_TRUE(
      client.send_raw("POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n"
                      "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" +
                      smuggled));
  EXPECT_EQ(client.read_reply().status, 400);
  EXPECT_EQ(client.read_reply().status, 0);
  // Exactly chunked is read as chunked.
  HttpClient good(server.port());
  const std::string body = R"({"inputs": "hello"})";
  char size[16];
  std::snprintf(size, sizeof size, "%zx", body.size());
  ASSERT_TRUE(
      good.send_raw("POST /predict HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"s +
                    size + "\r\n" + body + "\r\n0\r\n\r\n"));
  EXPECT_EQ(good.read_reply().status, 200);
  HttpClient metrics(server.port());
  EXPECT_EQ(metric_value(metrics.get("/metrics").body,
                         "bertfit_rejections_total{reason=\"bad_framing\",status=\"400\"}"),
            4);
}

TEST(ServeAttack, NulBytesAndTrailingBytesInABodyAreRefused) {
  ServeProcess server("--model " + models().tiny + kFast);
  ASSERT_TRUE(server.started());
  HttpClient client(server.port());
  for (const std::string path : {"/predict", "/tokenize"}) {
    EXPECT_EQ(client.post(path, "{\"inputs\":\"ab\"}\0garbage{{"s).status, 400) << path;
    EXPECT_EQ(client.post(path, R"({"inputs":"ab"} {"inputs":"cd"})").status, 400) << path;
    EXPECT_EQ(client.post(path, R"({"inputs":"ab", "inputs":"cd"})").status, 400) << path;
    EXPECT_EQ(client.post(path, R"({"inputs":"ab"})").status, 200) << path;
  }
}

// The queue holds at most --max-queued-tokens real tokens (429 past them); an input that waited
// over --max-queue-time gets 503 with Retry-After.
TEST(ServeAttack, TheQueueHasATokenBudgetAndADeadline) {
  {
    ServeProcess server("--model " + models().medium + kFast +
                        " --max-batch-requests 1 --max-queued-tokens 4096");
    ASSERT_TRUE(server.started());
    int full = 0;
    for (int round = 0; round < 10 && full == 0; ++round) {
      HttpClient first(server.port()), second(server.port());
      // 8 inputs of ~402 tokens, one batch each: the first request's inputs wait in the queue.
      ASSERT_TRUE(first.send_raw(raw_post("/predict", batch_body(8, 400))));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      HttpReply r = second.post("/predict", batch_body(8, 400));
      if (r.status == 429) {
        ++full;
        EXPECT_EQ(json::parse(r.body)["error_type"], "overloaded");
        EXPECT_EQ(r.headers["retry-after"], "1");
      } else {
        EXPECT_EQ(r.status, 200) << r.body;
      }
      EXPECT_EQ(first.read_reply().status, 200);
    }
    EXPECT_GT(full, 0);
    HttpClient client(server.port());
    EXPECT_GT(metric_value(client.get("/metrics").body,
                           "bertfit_rejections_total{reason=\"queue_full\",status=\"429\"}"),
              0);
    // One request larger than the budget is still taken by an empty queue.
    EXPECT_EQ(client.post("/predict", batch_body(16, 400)).status, 200);
  }
  ServeProcess server("--model " + models().medium + kFast +
                      " --max-batch-requests 1 --max-queue-time 0.001");
  ASSERT_TRUE(server.started());
  HttpClient client(server.port());
  // The 2nd to 8th inputs wait for the batches before them (each far over 1 ms).
  HttpReply r = client.post("/predict", batch_body(8, 400));
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(r.headers["retry-after"], "1");
  EXPECT_NE(r.body.find("--max-queue-time"), std::string::npos) << r.body;
  // A single input does not wait, once the batch the engine was computing when the rest were
  // refused is done (a slow build may still be in it: then the single input waits and is refused
  // too, counted as such).
  int status = 0, attempts = 0;
  for (; attempts < 40 && status != 200; ++attempts) {
    if (attempts > 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    status = client.post("/predict", R"({"inputs": "alone"})").status;
    EXPECT_TRUE(status == 200 || status == 503) << status;
  }
  EXPECT_EQ(status, 200);
  EXPECT_EQ(metric_value(client.get("/metrics").body,
                         "bertfit_rejections_total{reason=\"queue_timeout\",status=\"503\"}"),
            attempts);  // the batch's, and each refused single input's
}

// /health and /metrics answer while the queue still holds work queued before them.
TEST(ServeAttack, HealthNeverWaitsBehindInference) {
  ServeProcess server("--model " + models().medium + kFast + " --max-batch-requests 1");
  ASSERT_TRUE(server.started());
  std::vector<std::unique_ptr<HttpClient>> workers;
  for (int i = 0; i < 4; ++i) {
    workers.push_back(std::make_unique<HttpClient>(server.port()));
    ASSERT_TRUE(workers.back()->send_raw(raw_post("/predict", batch_body(8, 400))));
  }
  // Wait until the queue holds the work (the requests are read and tokenized).
  HttpClient observer(server.port());
  long queued = 0;
  for (int i = 0; i < 500 && queued < 8; ++i) {
    queued = metric_value(observer.get("/metrics").body, "bertfit_queue_size");
  }
  ASSERT_GE(queued, 8);
  HttpClient health(server.port());
  EXPECT_EQ(health.get("/health").status, 200);
  // The last request queued is not answered yet: /health went ahead of it.
  EXPECT_FALSE(workers.back()->has_reply_bytes());
  EXPECT_GT(metric_value(observer.get("/metrics").body, "bertfit_queue_size"), 0);
  for (auto& w : workers) EXPECT_EQ(w->read_reply().status, 200);
}

TEST(ServeAttack, EveryRefusalAndTimeoutIsCounted) {
  ServeProcess server("--model " + models().tiny + kFast + " --read-timeout 1 --idle-timeout 1");
  ASSERT_TRUE(server.started());
  {
    HttpClient c(server.port());
    EXPECT_EQ(c.post("/predict", json{{"inputs", std::string(3 << 20, 'a')}}.dump()).status, 413);
  }
  {
    HttpClient c(server.port());
    std::vector<std::string> headers;
    for (int i = 0; i < 5000; ++i) headers.push_back("X-Filler-" + std::to_string(i) + ": abc");
    EXPECT_EQ(c.post("/predict", R"({"inputs": "a"})", headers).status, 431);
  }
  {
    HttpClient c(server.port());
    ASSERT_TRUE(c.send_raw("\x01\x02 nonsense\r\n\r\n"));
    EXPECT_EQ(c.read_reply().status, 400);
  }
  HttpClient staller(server.port()), silent(server.port());
  ASSERT_TRUE(staller.send_raw("POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"));
  ASSERT_TRUE(silent.send_raw(""));
  EXPECT_TRUE(staller.closed_by_server(5000));
  EXPECT_TRUE(silent.closed_by_server(5000));
  HttpClient c(server.port());
  EXPECT_EQ(c.get("/nothing").status, 404);
  const std::vector<std::pair<std::string, long>> expected = {
      {"bertfit_rejections_total{reason=\"body_limit\",status=\"413\"}", 1},
      {"bertfit_rejections_total{reason=\"header_limit\",status=\"431\"}", 1},
      {"bertfit_rejections_total{reason=\"malformed_http\",status=\"400\"}", 1},
      {"bertfit_rejections_total{reason=\"read_timeout\",status=\"none\"}", 1},
      {"bertfit_rejections_total{reason=\"not_found\",status=\"404\"}", 1}};
  // Beast closes a timed-out socket in its timer's handler and completes the read (which counts
  // the timeout) in a later one: under load the client can see the close first, so the counts
  // are awaited (up to 5 s), not read once.
  const std::string idle = "bertfit_rejections_total{reason=\"idle_timeout\",status=\"none\"}";
  std::string m;
  for (int i = 0; i < 50; ++i) {
    m = c.get("/metrics").body;
    bool all = metric_value(m, idle) >= 1;
    for (const auto& [line, n] : expected) all = all && metric_value(m, line) == n;
    if (all) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (const auto& [line, n] : expected) {
    EXPECT_EQ(metric_value(m, line), n) << line << "\n" << m;
  }
  EXPECT_GE(metric_value(m, idle), 1) << m;
}

TEST(ServeAttack, TimersAndLimitsMustBeFinitePositiveNumbers) {
  const std::string model = "serve --port 0 --model " + models().tiny;
  for (const auto& [args, needle] : std::vector<std::pair<std::string, std::string>>{
           {" --read-timeout inf", "--read-timeout"},
           {" --read-timeout nan", "--read-timeout"},
           {" --read-timeout 1e300", "--read-timeout"},
           {" --idle-timeout -1", "--idle-timeout"},
           {" --max-queue-time inf", "--max-queue-time"},
           {" --max-queue-time 0", "--max-queue-time"},
           {" --max-connections -1", "--max-connections"},
           {" --max-queued-tokens -5", "--max-queued-tokens"},
           {" --tokenization-workers -2", "--tokenization-workers"},
           {" --max-batch-tokens 4096 --max-queued-tokens 100", "--max-queued-tokens"},
           {" --api-key a --api-key-file /nonexistent", "--api-key-file"},
           {" --api-key-file /nonexistent/key", "/nonexistent/key"}}) {
    RunResult r = run_bertfit(model + args);
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_NE(r.err.find(needle), std::string::npos) << args << ": " << r.err;
    EXPECT_EQ(r.err.find("listening"), std::string::npos) << args;
  }
}

// The key from --api-key-file or BERTFIT_API_KEY (out of `ps`); the scheme in any case; a 401
// says how to authenticate.
TEST(ServeAttack, ApiKeyFromAFileOrTheEnvironment) {
  TempDir tmp;
  write_text(tmp / "key", "from-file\n");
  const std::string body = R"({"inputs": "hello"})";
  {
    ServeProcess server("--model " + models().tiny + kFast + " --api-key-file " + (tmp / "key"));
    ASSERT_TRUE(server.started());
    HttpClient client(server.port());
    HttpReply r = client.post("/predict", body);
    EXPECT_EQ(r.status, 401);
    EXPECT_EQ(r.headers["www-authenticate"], "Bearer");
    EXPECT_EQ(client.post("/predict", body, {"Authorization: Bearer from-file"}).status, 200);
    EXPECT_EQ(client.post("/predict", body, {"Authorization: bearer from-file"}).status, 200);
    EXPECT_EQ(client.post("/predict", body, {"Authorization: BEARER from-file"}).status, 200);
    EXPECT_EQ(client.post("/predict", body, {"Authorization: Bearerfrom-file"}).status, 401);
    EXPECT_EQ(client.post("/predict", body, {"Authorization: Basic from-file"}).status, 401);
    // The key is not on the command line.
    const std::string cmdline = read_text("/proc/" + std::to_string(server.pid()) + "/cmdline");
    EXPECT_EQ(cmdline.find("from-file"), std::string::npos);
  }
  ServeProcess server("--model " + models().tiny + kFast,
                      ServeSetup{0, {{"BERTFIT_API_KEY", "from-env"}}});
  ASSERT_TRUE(server.started());
  HttpClient client(server.port());
  EXPECT_EQ(client.post("/predict", body).status, 401);
  EXPECT_EQ(client.post("/predict", body, {"Authorization: Bearer from-env"}).status, 200);
  EXPECT_EQ(client.get("/health").status, 200);  // open without a key
}

// SIGTERM does not wait the 30 s read timeout for a client still sending its request.
TEST(ServeAttack, ShutdownClosesConnectionsStillBeingRead) {
  ServeProcess server("--model " + models().tiny + kFast);  // --read-timeout 30
  ASSERT_TRUE(server.started());
  HttpClient slow(server.port());
  ASSERT_TRUE(slow.send_raw("POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(server.stop(SIGTERM), 0);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // The grace is 2 s; 15 s is far below the read timeout the old server waited.
  EXPECT_LT(seconds, 15) << "the server waited " << seconds << " s for a slow client";
  EXPECT_TRUE(slow.closed_by_server(1000));
}

}  // namespace
}  // namespace bertfit::testing
