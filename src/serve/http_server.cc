// The Beast/Asio HTTP server of bertfit serve (see http_server.h).
#include "serve/http_server.h"

#include "serve/http_beast.h"  // first: it includes <utility> before Boost (see there)
//
#include <sys/socket.h>

#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/log.h"

namespace bertfit::serve {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

std::chrono::milliseconds to_ms(double seconds) {
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000.0));
}

constexpr auto kAcceptRetry = std::chrono::milliseconds(50);
constexpr auto kWarnEvery = std::chrono::seconds(10);
// A read buffer larger than this is given back between requests.
constexpr std::size_t kKeptBufferBytes = 64 << 10;

class Session;

// What the connections share: the options, the service, the acceptor, and the live sessions
// (reaped when idle at the connection limit, closed at shutdown).
struct Server {
  Server(const HttpOptions& o, Service& s, net::io_context& c)
      : options(o), service(s), metrics(s.metrics()), ioc(c), acceptor(c), accept_retry(c) {}
  const HttpOptions& options;
  Service& service;
  Metrics& metrics;
  net::io_context& ioc;
  tcp::acceptor acceptor;
  net::steady_timer accept_retry;  // only touched by the accept chain (one at a time)
  std::atomic<bool> stopping{false};
  std::atomic<int> sessions{0};
  std::atomic<int> reaped{0};  // sessions being closed by reap_idle, not yet destroyed
  std::mutex mu;               // guards registry and the warning's rate limit
  std::vector<std::weak_ptr<Session>> registry;
  Clock::time_point last_warning{};
  long warnings_held = 0;

  HttpLimits limits() const { return {options.max_header_bytes, options.max_body_bytes}; }
  void add(const std::shared_ptr<Session>& s);
  // Closes the connection idle the longest; false if none is idle.
  bool reap_idle();
  // Closes every idle connection, and those still reading a request when `reading` is set.
  void close_all(bool reading);
  // A warning at most once per kWarnEvery, saying how many were held back.
  void warn_limited(const std::string& message);
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  enum class Phase { kIdle, kReading, kServing };

  Session(tcp::socket socket, Server& server) : stream_(std::move(socket)), server_(server) {
    ++server_.sessions;
  }
  ~Session() {
    if (reaped_) --server_.reaped;
    --server_.sessions;
  }

  void start() {
    net::dispatch(stream_.get_executor(),
                  [self = shared_from_this()] { self->wait_for_request(); });
  }

  Phase phase() const { return phase_; }
  // Marks the session as taken by reap_idle (once): true for the first caller.
  bool take_for_reaping() {
    if (reaped_.exchange(true)) return false;
    ++server_.reaped;
    return true;
  }
  bool reaped() const { return reaped_; }
  Clock::time_point idle_since() const { return Clock::time_point(Clock::duration(idle_since_)); }

  // Closes the connection (on its strand) if it is still idle with nothing received, or, when
  // `reading` is set, also if it is still reading a request. reason: what /metrics counts.
  void close_if(bool reading, const char* reason) {
    net::post(stream_.get_executor(), [self = shared_from_this(), reading, reason] {
      // Bytes that arrived while idle are a request in flight: read and answer it.
      beast::error_code ec;
      const bool idle = self->phase_ == Phase::kIdle && self->stream_.socket().available(ec) == 0;
      if (idle || (reading && self->phase_ == Phase::kReading)) {
        if (reason != nullptr) self->server_.metrics.rejection(reason, 0);
        self->close();
      } else if (self->reaped_.exchange(false)) {
        --self->server_.reaped;  // a request arrived first: it stays, and counts again
      }
    });
  }

 private:
  // Between requests: wait up to idle_timeout for the first byte of the next one.
  void wait_for_request() {
    if (watching_) {
      // The watch of the last request is still waiting: end it, then come back here.
      resume_after_watch_ = true;
      beast::error_code ec;
      stream_.socket().cancel(ec);
      return;
    }
    head_ = false;
    release_memory();
    if (buffer_.size() > 0) return read_header();  // pipelined: already here
    if (server_.stopping) return close();
    set_phase(Phase::kIdle);
    stream_.expires_after(to_ms(server_.options.idle_timeout));
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                              if (ec) {
                                if (ec == beast::error::timeout) {
                                  self->server_.metrics.rejection("idle_timeout", 0);
                                }
                                return self->close();
                              }
                              self->buffer_.commit(n);
                              self->read_header();
                            });
  }

  // From its first byte, the whole request must arrive within read_timeout.
  void read_header() {
    set_phase(Phase::kReading);
    start_ = Clock::now();
    parser_.emplace();
    beast_detail::set_limits(*parser_, server_.limits());
    stream_.expires_after(to_ms(server_.options.read_timeout));
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, std::size_t) {
                              if (ec) return self->read_failed(ec);
                              self->after_header();
                            });
  }

  void after_header() {
    const auto& req = parser_->get();
    if (auto bad = check_framing(beast_detail::framing_headers(req.base()))) {
      return fail(*bad);
    }
    // 100 Continue only to an HTTP/1.1 client about to send a body (RFC 9110 §10.1.1: never
    // to HTTP/1.0).
    auto expect = req.find(http::field::expect);
    const bool body_follows = parser_->chunked() || parser_->content_length().value_or(0) > 0;
    if (expect != req.end() && beast::iequals(expect->value(), "100-continue") &&
        req.version() >= 11 && body_follows) {
      continue_ = {http::status::continue_, 11};
      return http::async_write(stream_, continue_,
                               [self = shared_from_this()](beast::error_code ec, std::size_t) {
                                 if (ec) return self->close();
                                 self->read_body();
                               });
    }
    read_body();
  }

  void read_body() {
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) {
                       if (ec) return self->read_failed(ec);
                       self->dispatch();
                     });
  }

  void read_failed(const beast::error_code& ec) {
    if (auto refusal = beast_detail::parse_error(ec, server_.limits())) return fail(*refusal);
    // Timeout, hang-up or reset: nobody to answer.
    if (ec == beast::error::timeout) server_.metrics.rejection("read_timeout", 0);
    close();
  }

  void dispatch() {
    set_phase(Phase::kServing);
    stream_.expires_never();  // the compute worker takes what it takes
    auto& req = parser_->get();
    keep_alive_ = req.keep_alive();
    head_ = req.method() == http::verb::head;
    HttpRequest r;
    r.method = std::string(req.method_string());
    r.target = std::string(req.target());
    for (const auto& field : req) {
      if (field.name() != http::field::authorization) continue;
      if (r.authorization_headers++ == 0) r.authorization = std::string(field.value());
    }
    r.body = std::move(req.body());
    r.start = start_;
    client_gone_ = std::make_shared<std::atomic<bool>>(false);
    r.client_gone = client_gone_;
    parser_.reset();
    watch_client();
    server_.service.handle(std::move(r), [self = shared_from_this()](HttpResponse response) {
      net::post(self->stream_.get_executor(), [self, response = std::move(response)]() mutable {
        self->write(std::move(response));
      });
    });
  }

  // While the answer is being made: a client that closes the connection (its FIN: a read
  // would give end of stream; or a reset) has gone, and its work is dropped
  // (HttpRequest::client_gone). Readiness alone proves nothing (it may be stale, or be a
  // request's last bytes already read), so a non-blocking peek decides; with nothing to read
  // the watch waits again. Bytes of a pipelined request end the watch; they are read after
  // the answer.
  void watch_client() {
    if (buffer_.size() > 0) return;  // pipelined: the client is there
    watching_ = true;
    stream_.socket().async_wait(
        tcp::socket::wait_read, [self = shared_from_this()](beast::error_code ec) {
          self->watching_ = false;
          if (self->resume_after_watch_) {
            self->resume_after_watch_ = false;
            return self->wait_for_request();
          }
          if (ec) return;
          char byte;
          const ssize_t n =
              ::recv(self->stream_.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
          if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            *self->client_gone_ = true;
          } else if (n < 0) {
            self->watch_client();  // nothing after all: wait again
          }
        });
  }

  void write(HttpResponse r) {
    set_phase(Phase::kServing);
    response_ = {};
    response_.version(11);
    response_.result(static_cast<unsigned>(r.status));
    response_.set(http::field::content_type, r.content_type);
    for (const auto& [name, value] : r.headers) response_.set(name, value);
    response_.body() = std::move(r.body);
    const bool keep = keep_alive_ && !server_.stopping;
    response_.keep_alive(keep);
    response_.prepare_payload();
    if (head_) {
      // HEAD: GET's headers, Content-Length included, and no body (RFC 9110 §9.3.2).
      const std::size_t length = response_.body().size();
      response_.body().clear();
      response_.content_length(length);
    }
    stream_.expires_after(to_ms(server_.options.read_timeout));
    http::async_write(stream_, response_,
                      [self = shared_from_this(), keep](beast::error_code ec, std::size_t) {
                        if (ec) {
                          if (ec == beast::error::timeout) {
                            self->server_.metrics.rejection("write_timeout", 0);
                          }
                          return self->close();
                        }
                        if (!keep) return self->linger_close();
                        self->wait_for_request();
                      });
  }

  // Answers a request that could not be read, then closes.
  void fail(const FramingError& e) {
    server_.metrics.rejection(e.reason, e.status);
    keep_alive_ = false;
    buffer_.clear();  // nothing after a refused request is read as a request
    write(error_response(e.status, "validation", e.message));
  }

  // What a connection keeps between requests: no written answer, no large read buffer.
  void release_memory() {
    response_ = {};
    if (buffer_.size() == 0 && buffer_.capacity() > kKeptBufferBytes) buffer_.shrink_to_fit();
  }

  // Closes the sending side, then discards what the client still sends (up to 16 MB or 2 s) so
  // that a client still writing its body reads the answer instead of a reset.
  void linger_close() {
    release_memory();
    set_phase(Phase::kServing);
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.expires_after(std::chrono::seconds(2));
    drain();
  }
  void drain() {
    stream_.async_read_some(net::buffer(drain_),
                            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                              self->drained_ += n;
                              if (ec || self->drained_ > (16u << 20)) return self->close();
                              self->drain();
                            });
  }

  void close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
  }

  void set_phase(Phase p) {
    if (p == Phase::kIdle) idle_since_ = Clock::now().time_since_epoch().count();
    phase_ = p;
  }

  beast::tcp_stream stream_;
  Server& server_;
  beast::flat_buffer buffer_;
  std::optional<beast_detail::RequestParser> parser_;
  http::response<http::empty_body> continue_;
  http::response<http::string_body> response_;
  std::array<char, 4096> drain_{};
  std::size_t drained_ = 0;
  Clock::time_point start_;
  // Read from other threads (reaping, shutdown) as hints; acted on only on this strand.
  std::atomic<Phase> phase_{Phase::kReading};
  std::atomic<Clock::rep> idle_since_{0};
  std::atomic<bool> reaped_{false};
  bool keep_alive_ = true;
  bool head_ = false;  // the request being answered is a HEAD
  std::shared_ptr<std::atomic<bool>> client_gone_;
  bool watching_ = false, resume_after_watch_ = false;  // watch_client's wait is pending
};

void Server::add(const std::shared_ptr<Session>& s) {
  std::lock_guard lock(mu);
  if (registry.size() >= 64 && registry.size() % 64 == 0) {
    std::erase_if(registry, [](const std::weak_ptr<Session>& w) { return w.expired(); });
  }
  registry.push_back(s);
}

bool Server::reap_idle() {
  std::shared_ptr<Session> oldest;
  {
    std::lock_guard lock(mu);
    for (auto& w : registry) {
      auto s = w.lock();
      if (s && !s->reaped() && s->phase() == Session::Phase::kIdle &&
          (!oldest || s->idle_since() < oldest->idle_since())) {
        oldest = std::move(s);
      }
    }
    if (!oldest || !oldest->take_for_reaping()) return false;
  }
  oldest->close_if(false, "reaped_idle");
  return true;
}

void Server::close_all(bool reading) {
  std::lock_guard lock(mu);
  for (auto& w : registry) {
    if (auto s = w.lock()) s->close_if(reading, reading ? "shutdown" : nullptr);
  }
}

void Server::warn_limited(const std::string& message) {
  std::lock_guard lock(mu);
  const auto now = Clock::now();
  if (last_warning != Clock::time_point{} && now - last_warning < kWarnEvery) {
    ++warnings_held;
    return;
  }
  if (warnings_held > 0) {
    log_warn(message, " (and ", warnings_held, " more in the last ", kWarnEvery.count(), " s)");
  } else {
    log_warn(message);
  }
  last_warning = now;
  warnings_held = 0;
}

// Errors after which accepting at once would fail again at once.
bool out_of_resources(const beast::error_code& ec) {
  return ec == net::error::no_descriptors || ec.value() == ENFILE || ec == net::error::no_memory ||
         ec == net::error::no_buffer_space;
}

void accept(Server& server);

void on_accepted(Server& server, tcp::socket socket) {
  if (server.sessions - server.reaped >= server.options.max_connections && !server.reap_idle()) {
    server.metrics.rejection("max_connections", 0);
    beast::error_code ignored;
    socket.close(ignored);
    return;
  }
  beast::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  auto session = std::make_shared<Session>(std::move(socket), server);
  server.add(session);
  session->start();
}

void accept(Server& server) {
  server.acceptor.async_accept(
      net::make_strand(server.ioc), [&server](beast::error_code ec, tcp::socket socket) {
        if (server.stopping || !server.acceptor.is_open()) return;
        if (!ec) {
          on_accepted(server, std::move(socket));
          return accept(server);
        }
        if (ec == net::error::operation_aborted) return;
        server.metrics.rejection(out_of_resources(ec) ? "accept_no_resources" : "accept_error", 0);
        server.warn_limited(
            "serve: accept: " + ec.message() +
            (out_of_resources(ec) ? "; raise `ulimit -n` or lower --max-connections" : ""));
        // The pending connection stays in the backlog, so accepting again now would fail at
        // once: free a descriptor, wait, then try again.
        if (out_of_resources(ec)) server.reap_idle();
        server.accept_retry.expires_after(kAcceptRetry);
        server.accept_retry.async_wait([&server](beast::error_code) { accept(server); });
      });
}

}  // namespace

void serve_http(const HttpOptions& options, Service& service,
                const std::function<void(const std::string&, int)>& on_listening) {
  net::io_context ioc(options.threads);
  Server server(options, service, ioc);
  service.set_post([&ioc](std::function<void()> f) { net::post(ioc, std::move(f)); });

  tcp::acceptor& acceptor = server.acceptor;
  tcp::endpoint endpoint;
  try {
    tcp::resolver resolver(ioc);
    auto results = resolver.resolve(options.host, std::to_string(options.port),
                                    tcp::resolver::passive | tcp::resolver::numeric_service);
    endpoint = results.begin()->endpoint();
    acceptor.open(endpoint.protocol());
    acceptor.set_option(net::socket_base::reuse_address(true));
    acceptor.bind(endpoint);
    acceptor.listen(net::socket_base::max_listen_connections);
  } catch (const boost::system::system_error& e) {
    throw_error("serve: cannot listen on ", options.host, ":", options.port, ": ",
                e.code().message());
  }
  const tcp::endpoint bound = acceptor.local_endpoint();
  accept(server);

  // Shutdown: stop accepting, close idle connections, give those still reading a request
  // shutdown_grace to finish it, and poll until every session has ended; a second signal exits
  // at once.
  net::signal_set signals(ioc, SIGINT, SIGTERM);
  net::steady_timer poll(ioc), grace(ioc);
  std::function<void()> wait_for_sessions = [&] {
    if (server.sessions == 0) {
      signals.cancel();
      grace.cancel();
      return;
    }
    poll.expires_after(std::chrono::milliseconds(20));
    poll.async_wait([&](beast::error_code) { wait_for_sessions(); });
  };
  signals.async_wait([&](beast::error_code ec, int signal) {
    if (ec) return;
    log_info("serve: signal ", signal, ": finishing the requests in flight");
    server.stopping = true;
    beast::error_code ignored;
    acceptor.close(ignored);  // a pending accept retry then ends at its next attempt
    server.close_all(false);
    grace.expires_after(to_ms(std::min(options.shutdown_grace, options.read_timeout)));
    grace.async_wait([&](beast::error_code e) {
      if (!e) server.close_all(true);
    });
    signals.async_wait([](beast::error_code ec2, int second) {
      if (!ec2) std::_Exit(128 + second);
    });
    wait_for_sessions();
  });

  on_listening(bound.address().to_string(), bound.port());
  // A handler that throws (none should) costs its connection, never the server.
  auto run = [&ioc] {
    for (;;) {
      try {
        ioc.run();
        return;
      } catch (const std::exception& e) {
        log_warn("serve: ", e.what());
      }
    }
  };
  std::vector<std::thread> threads;
  for (int i = 1; i < options.threads; ++i) threads.emplace_back(run);
  run();
  for (auto& t : threads) t.join();
  service.set_post([](std::function<void()> f) { f(); });
}

}  // namespace bertfit::serve
