// The closed-loop HTTP load generator (see load_client.h). Each connection is one thread with its
// own io_context; its Beast operations are asynchronous only so that tcp_stream's deadlines apply
// (Beast's timeouts act on asynchronous operations alone) and so that the main thread can stop
// an open request at the window's end (io_context::stop): the thread starts one operation, runs
// its io_context until that operation completes, and goes on, so each connection reads like
// synchronous code. Samples are kept per thread and merged once all threads have stopped.

// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility> (GCC 12, C++20).
#include <utility>
//
#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "serve/load_client.h"

namespace bertfit::serve {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr int kMaxConnections = 256;
constexpr std::size_t kErrorBodyBytes = 200;
constexpr auto kConnectRetry = std::chrono::milliseconds(10);
constexpr auto kPollEvery = std::chrono::milliseconds(5);

Clock::duration to_duration(double seconds) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// One request's outcome: status 0 for a socket failure or timeout.
struct Sample {
  Clock::time_point sent, done;
  int status = 0;
};

bool is_error(const Sample& s) { return s.status < 200 || s.status > 299; }

// What one connection's thread keeps: every sample, and the first error sent after warm-up.
struct ThreadRecord {
  std::vector<Sample> samples;
  std::optional<Sample> first_error;
  std::string first_error_message;
  // Answers sent after warm-up, for the main thread's min_requests check (the only shared write).
  alignas(64) std::atomic<long> answers_after_warmup{0};
};

// What every connection shares (read-only but for next_body).
struct Shared {
  const LoadSpec& spec;
  Clock::time_point warmup_end;
  std::atomic<bool> stop{false};
  std::atomic<long> next_body{0};
};

// An operation's end: ok, failed (ec set), or stopped (the main thread ended the run first).
enum class OpEnd { kOk, kFailed, kStopped };

// One keep-alive connection driven in a closed loop on the calling thread.
class Connection {
 public:
  Connection(Shared& shared, net::io_context& ioc, ThreadRecord& record)
      : shared_(shared), spec_(shared.spec), ioc_(ioc), record_(record) {}

  void run() {
    while (!shared_.stop.load(std::memory_order_relaxed)) {
      const long k = shared_.next_body.fetch_add(1, std::memory_order_relaxed);
      const std::string& body = spec_.bodies[static_cast<std::size_t>(k) % spec_.bodies.size()];
      if (!send(body)) return;
    }
  }

 private:
  // Sends one request (once more on a new connection if a kept one turned out closed) and
  // records its outcome; false when the run was stopped meanwhile.
  bool send(const std::string& body) {
    const bool reused = stream_.has_value() && answers_on_connection_ > 0;
    if (!stream_) {
      const Clock::time_point start = Clock::now();
      const OpEnd c = connect();
      if (c == OpEnd::kStopped) return false;
      if (c == OpEnd::kFailed) {
        record({start, Clock::now(), 0}, "connect: " + ec_.message());
        std::this_thread::sleep_for(kConnectRetry);
        return true;
      }
    }
    Sample s;
    std::string failure;
    OpEnd e = exchange(body, s, failure);
    if (e == OpEnd::kFailed && reused && closed_by_peer(ec_)) {
      close();
      const Clock::time_point start = Clock::now();
      e = connect();
      if (e == OpEnd::kFailed) {
        s = {start, Clock::now(), 0};
        failure = "connect: " + ec_.message();
      } else if (e == OpEnd::kOk) {
        e = exchange(body, s, failure);
      }
    }
    if (e == OpEnd::kStopped) return false;
    record(s, failure);
    return true;
  }

  // Writes one request on the open connection and reads its answer into s (s.status 0 and
  // failure set when the socket failed; the connection is then closed).
  OpEnd exchange(const std::string& body, Sample& s, std::string& failure) {
    http::request<http::string_body> req{http::verb::post, spec_.target, 11};
    req.set(http::field::host, spec_.host + ":" + std::to_string(spec_.port));
    req.set(http::field::content_type, "application/json");
    req.keep_alive(true);
    req.body() = body;
    req.prepare_payload();
    http::response_parser<http::string_body> parser;
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());

    s = {Clock::now(), {}, 0};
    stream_->expires_after(to_duration(spec_.request_timeout_s));
    OpEnd e = run_op([&](auto handler) { http::async_write(*stream_, req, handler); });
    const char* stage = "write: ";
    if (e == OpEnd::kOk) {
      stage = "read: ";
      e = run_op([&](auto handler) { http::async_read(*stream_, buffer_, parser, handler); });
    }
    s.done = Clock::now();
    if (e == OpEnd::kFailed) {
      failure = stage + ec_.message();
      close();
      return e;
    }
    if (e == OpEnd::kStopped) return e;
    const auto& res = parser.get();
    s.status = static_cast<int>(res.result_int());
    if (is_error(s)) {
      failure = "HTTP " + std::to_string(s.status) + ": " + res.body().substr(0, kErrorBodyBytes);
    }
    ++answers_on_connection_;
    if (!res.keep_alive()) close();
    return OpEnd::kOk;
  }

  OpEnd connect() {
    if (!endpoints_) {
      tcp::resolver resolver(ioc_);
      auto results = resolver.resolve(spec_.host, std::to_string(spec_.port), ec_);
      if (ec_) return OpEnd::kFailed;
      endpoints_ = std::move(results);
    }
    stream_.emplace(ioc_);
    answers_on_connection_ = 0;
    buffer_.clear();
    stream_->expires_after(to_duration(spec_.connect_timeout_s));
    const OpEnd e = run_op([&](auto handler) { stream_->async_connect(*endpoints_, handler); });
    if (e == OpEnd::kOk) {
      beast::error_code ignored;
      stream_->socket().set_option(tcp::no_delay(true), ignored);
    } else if (e == OpEnd::kFailed) {
      close();
    }
    return e;
  }

  // Starts one asynchronous operation (start(handler)) and runs this thread's io_context until it
  // completes. kStopped when the main thread stopped the io_context first: the connection is then
  // closed and the operation run to its (aborted) end here, so that no handler outlives the
  // variables it refers to.
  template <class Start>
  OpEnd run_op(Start&& start) {
    bool done = false;
    start([&](beast::error_code ec, auto&&...) {
      ec_ = ec;
      done = true;
    });
    ioc_.run();
    ioc_.restart();
    if (done) return ec_ ? OpEnd::kFailed : OpEnd::kOk;
    // The main thread stops each io_context once: this run ends with the aborted operation. The
    // stream outlives the run (an operation may touch it until its handler is called).
    if (stream_) stream_->close();
    ioc_.run();
    ioc_.restart();
    stream_.reset();
    return OpEnd::kStopped;
  }

  // The errors of a kept connection the server had closed before the request arrived.
  static bool closed_by_peer(const beast::error_code& ec) {
    return ec == http::error::end_of_stream || ec == net::error::eof ||
           ec == net::error::connection_reset || ec == net::error::broken_pipe ||
           ec == net::error::connection_aborted;
  }

  void close() {
    if (!stream_) return;
    beast::error_code ignored;
    stream_->socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_->close();
    stream_.reset();
  }

  void record(const Sample& s, const std::string& failure) {
    record_.samples.push_back(s);
    if (s.sent < shared_.warmup_end) return;
    if (s.status != 0) record_.answers_after_warmup.fetch_add(1, std::memory_order_relaxed);
    if (is_error(s) && !record_.first_error) {
      record_.first_error = s;
      record_.first_error_message = failure;
    }
  }

  Shared& shared_;
  const LoadSpec& spec_;
  net::io_context& ioc_;
  ThreadRecord& record_;
  std::optional<tcp::resolver::results_type> endpoints_;
  std::optional<beast::tcp_stream> stream_;
  beast::flat_buffer buffer_;
  long answers_on_connection_ = 0;
  beast::error_code ec_;
};

void check_spec(const LoadSpec& spec) {
  if (spec.bodies.empty()) throw_error("load spec: bodies must not be empty");
  if (spec.connections < 1 || spec.connections > kMaxConnections) {
    throw_error("load spec: connections must be 1..", kMaxConnections, ", not ", spec.connections);
  }
  if (spec.port <= 0 || spec.port > 65535) {
    throw_error("load spec: port must be 1..65535, not ", spec.port);
  }
  if (spec.host.empty()) throw_error("load spec: host must not be empty");
  if (spec.target.empty() || spec.target[0] != '/') {
    throw_error("load spec: target must start with '/', not '", spec.target, "'");
  }
  if (!(spec.warmup_s >= 0)) throw_error("load spec: warmup_s must be >= 0, not ", spec.warmup_s);
  if (!(spec.measure_s > 0)) throw_error("load spec: measure_s must be > 0, not ", spec.measure_s);
  if (spec.min_requests < 0) {
    throw_error("load spec: min_requests must be >= 0, not ", spec.min_requests);
  }
  if (!(spec.connect_timeout_s > 0) || !(spec.request_timeout_s > 0)) {
    throw_error("load spec: connect_timeout_s and request_timeout_s must be > 0, not ",
                spec.connect_timeout_s, " and ", spec.request_timeout_s);
  }
}

// Nearest rank: the smallest value with at least p% of the sorted values at or below it.
double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * sorted.size()));
  return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return percentile(values, 50);
}

LoadResult summarize(const std::vector<std::unique_ptr<ThreadRecord>>& records,
                     Clock::time_point window_start, Clock::time_point window_end,
                     long min_requests) {
  LoadResult r;
  r.seconds = std::chrono::duration<double>(window_end - window_start).count();
  const Clock::time_point middle = window_start + (window_end - window_start) / 2;
  std::vector<double> latencies, first_half, second_half;
  std::optional<Clock::time_point> first_error_at;
  for (const auto& record : records) {
    for (const Sample& s : record->samples) {
      if (s.sent < window_start || s.done > window_end) continue;
      if (s.status != 0) ++r.requests;
      if (is_error(s)) {
        ++r.errors;
        continue;
      }
      const double ms = std::chrono::duration<double, std::milli>(s.done - s.sent).count();
      latencies.push_back(ms);
      (s.done < middle ? first_half : second_half).push_back(ms);
    }
    const auto& e = record->first_error;
    if (e && e->done <= window_end && (!first_error_at || e->done < *first_error_at)) {
      first_error_at = e->done;
      r.first_error = record->first_error_message;
    }
  }
  std::sort(latencies.begin(), latencies.end());
  if (!latencies.empty()) {
    r.p50_ms = percentile(latencies, 50);
    r.p90_ms = percentile(latencies, 90);
    r.p99_ms = percentile(latencies, 99);
    r.max_ms = latencies.back();
    double sum = 0;
    for (double ms : latencies) sum += ms;
    r.mean_ms = sum / static_cast<double>(latencies.size());
  }
  if (r.seconds > 0) r.requests_per_s = static_cast<double>(latencies.size()) / r.seconds;
  if (!first_half.empty() && !second_half.empty() && r.requests >= min_requests) {
    const double a = median(std::move(first_half)), b = median(std::move(second_half));
    r.steady = std::abs(a - b) <= 0.05 * std::min(a, b);
  }
  return r;
}

}  // namespace

LoadResult run_http_load(const LoadSpec& spec) {
  check_spec(spec);
  const auto n = static_cast<std::size_t>(spec.connections);
  const Clock::time_point start = Clock::now();
  Shared shared{spec, start + to_duration(spec.warmup_s)};
  std::vector<std::unique_ptr<net::io_context>> contexts;
  std::vector<std::unique_ptr<ThreadRecord>> records;
  for (std::size_t i = 0; i < n; ++i) {
    contexts.push_back(std::make_unique<net::io_context>(1));
    records.push_back(std::make_unique<ThreadRecord>());
  }
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    threads.emplace_back([&shared, &ioc = *contexts[i], &record = *records[i]] {
      Connection(shared, ioc, record).run();
    });
  }

  // The window: measure_s after warm-up, extended until min_requests answers were counted.
  const Clock::time_point window_start = shared.warmup_end;
  std::this_thread::sleep_until(window_start + to_duration(spec.measure_s));
  const Clock::time_point latest = window_start + to_duration(3 * spec.measure_s);
  auto counted = [&] {
    long sum = 0;
    for (const auto& r : records) sum += r->answers_after_warmup.load(std::memory_order_relaxed);
    return sum;
  };
  while (counted() < spec.min_requests && Clock::now() < latest) {
    std::this_thread::sleep_until(std::min(Clock::now() + kPollEvery, latest));
  }
  const Clock::time_point window_end = Clock::now();

  shared.stop = true;
  for (const auto& ioc : contexts) ioc->stop();
  for (std::thread& t : threads) t.join();
  return summarize(records, window_start, window_end, spec.min_requests);
}

}  // namespace bertfit::serve
