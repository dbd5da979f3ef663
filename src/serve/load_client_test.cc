// The load client (load_client.h) against a tiny in-process Beast server whose answers take a
// known time and have a chosen status and connection behaviour: window counting, bodies in turn,
// errors (statuses, refused connections, timeouts, closed connections) and reconnects. Assertions
// are about correctness (bounds a closed loop cannot break), never speed.
#include "serve/load_client.h"

#include <utility>  // before Boost: see http_beast.h
//
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"

namespace bertfit::serve {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// How the test server ends a connection.
enum class Closing {
  kKeepAlive,     // keeps it open
  kHeader,        // answers with `Connection: close`, then closes
  kSilently,      // answers as keep-alive, then closes (the client finds out on its next request)
  kBeforeAnswer,  // reads a request and closes without answering
  kFirstOnly,     // answers the server's first request as kSilently, the others as kBeforeAnswer
};

struct Behaviour {
  int delay_ms = 0;
  unsigned status = 200;
  std::string body = R"({"ok":true})";
  Closing closing = Closing::kKeepAlive;
};

// Accepts on 127.0.0.1 (any free port), one thread per connection; records every request body.
class TestServer {
 public:
  explicit TestServer(Behaviour b)
      : behaviour_(std::move(b)), acceptor_(ioc_, {net::ip::address_v4::loopback(), 0}) {
    port_ = acceptor_.local_endpoint().port();
    accept_thread_ = std::thread([this] { accept_loop(); });
  }
  ~TestServer() {
    stopping_ = true;
    {  // wakes the blocking accept
      net::io_context ioc;
      tcp::socket s(ioc);
      boost::system::error_code ec;
      s.connect({net::ip::address_v4::loopback(), port_}, ec);
    }
    accept_thread_.join();
    for (std::thread& t : connections_) t.join();
  }

  int port() const { return port_; }
  std::vector<std::string> bodies() {
    std::lock_guard<std::mutex> lock(mu_);
    return bodies_;
  }
  int connections() const { return accepted_; }

 private:
  void accept_loop() {
    for (;;) {
      tcp::socket socket(ioc_);
      boost::system::error_code ec;
      acceptor_.accept(socket, ec);
      if (stopping_) return;
      if (ec) continue;
      ++accepted_;
      connections_.emplace_back([this, s = std::move(socket)]() mutable { serve(s); });
    }
  }

  void serve(tcp::socket& socket) {
    beast::flat_buffer buffer;
    for (;;) {
      http::request<http::string_body> req;
      boost::system::error_code ec;
      http::read(socket, buffer, req, ec);
      if (ec) return;
      {
        std::lock_guard<std::mutex> lock(mu_);
        bodies_.push_back(req.body());
      }
      if (behaviour_.closing == Closing::kBeforeAnswer) return;
      if (behaviour_.closing == Closing::kFirstOnly && answered_.exchange(true)) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(behaviour_.delay_ms));
      http::response<http::string_body> res{static_cast<http::status>(behaviour_.status), 11};
      res.set(http::field::content_type, "application/json");
      res.body() = behaviour_.body;
      res.keep_alive(behaviour_.closing != Closing::kHeader);
      res.prepare_payload();
      http::write(socket, res, ec);
      if (ec || behaviour_.closing != Closing::kKeepAlive) return;
    }
  }

  const Behaviour behaviour_;
  net::io_context ioc_;
  tcp::acceptor acceptor_;
  unsigned short port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> accepted_{0};
  std::atomic<bool> answered_{false};
  std::thread accept_thread_;
  std::vector<std::thread> connections_;  // touched by the accept thread, then the destructor
  std::mutex mu_;
  std::vector<std::string> bodies_;
};

LoadSpec short_spec(int port) {
  LoadSpec spec;
  spec.port = port;
  spec.bodies = {R"({"inputs":"a"})"};
  spec.warmup_s = 0.1;
  spec.measure_s = 0.3;
  spec.min_requests = 5;
  return spec;
}

TEST(LoadClient, ClosedLoopCountsAnswersInTheWindow) {
  const int delay_ms = 5;
  TestServer server({delay_ms});
  LoadSpec spec = short_spec(server.port());
  spec.connections = 3;
  const LoadResult r = run_http_load(spec);
  EXPECT_EQ(r.errors, 0) << r.first_error;
  EXPECT_EQ(r.first_error, "");
  EXPECT_GE(r.seconds, spec.measure_s);
  EXPECT_LE(r.seconds, 3 * spec.measure_s + 0.1);
  // Each connection has at most one request open: at most window / delay answers each, plus the
  // one sent before the window's start is not counted, so + 1 is generous.
  EXPECT_GT(r.requests, 0);
  EXPECT_LE(r.requests, static_cast<long>(r.seconds * 1000 / delay_ms + 1) * spec.connections);
  EXPECT_GE(r.requests, spec.min_requests);
  // The server saw every counted request, plus warm-up ones.
  EXPECT_GT(static_cast<long>(server.bodies().size()), r.requests);
  EXPECT_EQ(server.connections(), spec.connections);  // keep-alive: no reconnects
  EXPECT_GE(r.p50_ms, delay_ms);
  EXPECT_LE(r.p50_ms, r.p90_ms);
  EXPECT_LE(r.p90_ms, r.p99_ms);
  EXPECT_LE(r.p99_ms, r.max_ms);
  EXPECT_GE(r.mean_ms, delay_ms);
  EXPECT_LE(r.mean_ms, r.max_ms);
  EXPECT_NEAR(r.requests_per_s, r.requests / r.seconds, 1e-9);
}

TEST(LoadClient, MinRequestsExtendsTheWindow) {
  const int delay_ms = 20;
  TestServer server({delay_ms});
  LoadSpec spec = short_spec(server.port());
  spec.warmup_s = 0;
  spec.measure_s = 0.2;  // ~10 answers of 20 ms
  spec.min_requests = 20;
  const LoadResult r = run_http_load(spec);
  EXPECT_EQ(r.errors, 0) << r.first_error;
  // Extended past measure_s, never past 3 × measure_s; it stops once min_requests were counted.
  EXPECT_GT(r.seconds, spec.measure_s + 0.05);
  EXPECT_LE(r.seconds, 3 * spec.measure_s + 0.1);
  EXPECT_TRUE(r.requests >= spec.min_requests || r.seconds >= 3 * spec.measure_s)
      << r.requests << " answers in " << r.seconds << " s";
  EXPECT_LE(r.requests, static_cast<long>(r.seconds * 1000 / delay_ms + 1));
  if (r.requests < spec.min_requests) {
    EXPECT_FALSE(r.steady);
  }
}

TEST(LoadClient, SendsTheBodiesInTurn) {
  TestServer server({1});
  LoadSpec spec = short_spec(server.port());
  spec.bodies = {"[1]", "[2]", "[3]"};
  spec.warmup_s = 0.05;
  spec.measure_s = 0.1;
  const LoadResult r = run_http_load(spec);
  EXPECT_EQ(r.errors, 0) << r.first_error;
  const std::vector<std::string> seen = server.bodies();
  ASSERT_GE(seen.size(), 4u);
  for (std::size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], spec.bodies[i % 3]) << i;

  // Over several connections each body is sent equally often, give or take one.
  TestServer server2({1});
  spec.port = server2.port();
  spec.connections = 3;
  run_http_load(spec);
  std::map<std::string, long> counts;
  for (const std::string& b : server2.bodies()) ++counts[b];
  ASSERT_EQ(counts.size(), 3u);
  for (const auto& [body, n] : counts) {
    EXPECT_LE(std::abs(n - counts["[1]"]), 1) << body;
  }
}

TEST(LoadClient, NonSuccessAnswersAreErrors) {
  TestServer server({1, 429, R"({"error":"busy","error_type":"overloaded"})"});
  const LoadResult r = run_http_load(short_spec(server.port()));
  EXPECT_GT(r.requests, 0);
  EXPECT_EQ(r.errors, r.requests);
  EXPECT_EQ(r.first_error, R"(HTTP 429: {"error":"busy","error_type":"overloaded"})");
  EXPECT_EQ(r.requests_per_s, 0);  // no 2xx answer
  EXPECT_EQ(r.p50_ms, 0);
  EXPECT_FALSE(r.steady);
}

TEST(LoadClient, ErrorBodiesAreCutTo200Bytes) {
  TestServer server({0, 503, std::string(1000, 'x')});
  const LoadResult r = run_http_load(short_spec(server.port()));
  EXPECT_GT(r.errors, 0);
  EXPECT_EQ(r.first_error, "HTTP 503: " + std::string(200, 'x'));
}

// A port nobody listens on: one that was free a moment ago.
int closed_port() {
  net::io_context ioc;
  tcp::acceptor a(ioc, {net::ip::address_v4::loopback(), 0});
  return a.local_endpoint().port();
}

TEST(LoadClient, RefusedConnectionsAreCountedNotThrown) {
  LoadSpec spec = short_spec(closed_port());
  spec.connections = 2;
  spec.min_requests = 0;  // no answers come: no extension
  const LoadResult r = run_http_load(spec);
  EXPECT_EQ(r.requests, 0);
  EXPECT_GT(r.errors, 0);
  EXPECT_THAT(r.first_error, StartsWith("connect: "));
  EXPECT_THAT(r.first_error, HasSubstr("refused"));
  EXPECT_FALSE(r.steady);
  // Retries wait 10 ms: no spin (at most one failure per connection per 10 ms, and the window).
  EXPECT_LE(r.errors, static_cast<long>(r.seconds * 100 + 1) * spec.connections);
}

TEST(LoadClient, ReconnectsWhenTheServerClosesTheConnection) {
  for (Closing closing : {Closing::kHeader, Closing::kSilently}) {
    TestServer server({1, 200, "{}", closing});
    LoadSpec spec = short_spec(server.port());
    spec.measure_s = 0.2;
    spec.connections = 2;
    const LoadResult r = run_http_load(spec);
    EXPECT_GT(r.requests, 0) << static_cast<int>(closing);
    EXPECT_EQ(r.errors, 0) << static_cast<int>(closing) << ": " << r.first_error;
    // A new connection for every request.
    EXPECT_GE(server.connections(), static_cast<int>(server.bodies().size()) - spec.connections);
  }
}

TEST(LoadClient, AServerThatNeverAnswersGivesErrors) {
  TestServer server({0, 200, "{}", Closing::kBeforeAnswer});
  LoadSpec spec = short_spec(server.port());
  spec.warmup_s = 0;
  spec.connections = 2;
  spec.min_requests = 0;  // no answers come: no extension
  const LoadResult r = run_http_load(spec);
  EXPECT_EQ(r.requests, 0);
  EXPECT_GT(r.errors, 0);
  EXPECT_THAT(r.first_error, StartsWith("read: ")) << r.first_error;
  // A failure on a new connection is not sent again: one request seen per error, but for those
  // still open when the window ended.
  EXPECT_LE(static_cast<long>(server.bodies().size()), r.errors + spec.connections);
}

TEST(LoadClient, ARequestFailingAgainAfterTheReconnectIsOneError) {
  TestServer server({0, 200, "{}", Closing::kFirstOnly});
  LoadSpec spec = short_spec(server.port());
  spec.warmup_s = 0;
  spec.min_requests = 0;  // no answers come: no extension
  const LoadResult r = run_http_load(spec);
  // The first answer, then the second request: its kept connection is closed, and so is the new
  // one it is sent on again.
  EXPECT_EQ(r.requests, 1);
  EXPECT_GT(r.errors, 0);
  EXPECT_THAT(r.first_error, StartsWith("read: ")) << r.first_error;
  // The second request reached the server once (its first try met a closed socket), each later
  // one once: at most one seen request per error, the first answer and one open at the end.
  EXPECT_LE(static_cast<long>(server.bodies().size()), r.errors + 2);
}

TEST(LoadClient, SlowAnswersTimeOut) {
  TestServer server({400});
  LoadSpec spec = short_spec(server.port());
  spec.warmup_s = 0;
  spec.measure_s = 0.2;
  spec.min_requests = 0;
  spec.request_timeout_s = 0.05;
  const LoadResult r = run_http_load(spec);
  EXPECT_EQ(r.requests, 0);
  EXPECT_GT(r.errors, 0);
  EXPECT_THAT(r.first_error, StartsWith("read: ")) << r.first_error;
  EXPECT_THAT(r.first_error, HasSubstr("timeout")) << r.first_error;
}

TEST(LoadClient, BadSpecsThrowOneLine) {
  const auto expect_error = [](const LoadSpec& spec, const std::string& field) {
    try {
      run_http_load(spec);
      ADD_FAILURE() << "no error for " << field;
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_THAT(message, HasSubstr(field));
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    }
  };
  const LoadSpec good = short_spec(1);
  LoadSpec s = good;
  s.bodies.clear();
  expect_error(s, "bodies");
  for (int c : {0, -1, 257}) {
    s = good;
    s.connections = c;
    expect_error(s, "connections");
  }
  for (int p : {0, -5, 70000}) {
    s = good;
    s.port = p;
    expect_error(s, "port");
  }
  s = good;
  s.target = "predict";
  expect_error(s, "target");
  s = good;
  s.measure_s = 0;
  expect_error(s, "measure_s");
  s = good;
  s.warmup_s = -1;
  expect_error(s, "warmup_s");
  s = good;
  s.request_timeout_s = 0;
  expect_error(s, "request_timeout_s");
  s = good;
  s.min_requests = -1;
  expect_error(s, "min_requests");
}

}  // namespace
}  // namespace bertfit::serve
