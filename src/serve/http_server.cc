// The Beast/Asio HTTP server of bertfit serve (see http_server.h).
#include "serve/http_server.h"

// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility> (GCC 12, C++20).
#include <utility>
//
#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
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

bool is_http_parse_error(const beast::error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_method).category();
}

class Session;

// What the connections share: the options, the service, and the set of live sessions (closed
// when idle at shutdown).
struct Server {
  Server(const HttpOptions& o, Service& s, net::io_context& c) : options(o), service(s), ioc(c) {}
  const HttpOptions& options;
  Service& service;
  net::io_context& ioc;
  std::atomic<bool> stopping{false};
  std::atomic<int> sessions{0};
  std::mutex mu;
  std::vector<std::weak_ptr<Session>> registry;

  void add(const std::shared_ptr<Session>& s) {
    std::lock_guard lock(mu);
    if (registry.size() >= 64 && registry.size() % 64 == 0) {
      std::erase_if(registry, [](const std::weak_ptr<Session>& w) { return w.expired(); });
    }
    registry.push_back(s);
  }
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Server& server) : stream_(std::move(socket)), server_(server) {
    ++server_.sessions;
  }
  ~Session() { --server_.sessions; }

  void start() {
    net::dispatch(stream_.get_executor(),
                  [self = shared_from_this()] { self->wait_for_request(); });
  }

  // At shutdown: a connection waiting for its next request is closed; one in the middle of a
  // request is left to finish (its timeouts bound it).
  void close_if_idle() {
    net::post(stream_.get_executor(), [self = shared_from_this()] {
      // Bytes that arrived before the signal are a request in flight: read and answer it.
      beast::error_code ec;
      if (self->idle_ && self->stream_.socket().available(ec) == 0) self->close();
    });
  }

 private:
  // Between requests: wait up to idle_timeout for the first byte of the next one.
  void wait_for_request() {
    if (buffer_.size() > 0) return read_header();  // pipelined: already here
    if (server_.stopping) return close();
    idle_ = true;
    stream_.expires_after(to_ms(server_.options.idle_timeout));
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                              self->idle_ = false;
                              if (ec) return self->close();
                              self->buffer_.commit(n);
                              self->read_header();
                            });
  }

  // From its first byte, the whole request must arrive within read_timeout.
  void read_header() {
    start_ = Clock::now();
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(server_.options.max_header_bytes));
    parser_->body_limit(server_.options.max_body_bytes);
    stream_.expires_after(to_ms(server_.options.read_timeout));
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, std::size_t) {
                              if (ec) return self->read_failed(ec);
                              self->after_header();
                            });
  }

  void after_header() {
    const auto& req = parser_->get();
    auto expect = req.find(http::field::expect);
    if (expect != req.end() && beast::iequals(expect->value(), "100-continue")) {
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
    if (ec == http::error::body_limit) {
      return fail(413, "payload_limit",
                  cat("the request body is over ", server_.options.max_body_bytes, " bytes"));
    }
    if (ec == http::error::header_limit) {
      return fail(431, "validation",
                  cat("the request headers are over ", server_.options.max_header_bytes, " bytes"));
    }
    if (is_http_parse_error(ec) && ec != http::error::end_of_stream &&
        ec != http::error::partial_message) {
      return fail(400, "validation", "malformed HTTP request: " + ec.message());
    }
    close();  // timeout, hang-up or reset: nobody to answer
  }

  void dispatch() {
    stream_.expires_never();  // the compute worker takes what it takes
    const auto& req = parser_->get();
    keep_alive_ = req.keep_alive();
    HttpRequest r;
    r.method = std::string(req.method_string());
    r.target = std::string(req.target());
    if (auto it = req.find(http::field::authorization); it != req.end()) {
      r.authorization = std::string(it->value());
    }
    r.body = std::move(parser_->get().body());
    r.start = start_;
    server_.service.handle(std::move(r), [self = shared_from_this()](HttpResponse response) {
      net::post(self->stream_.get_executor(), [self, response = std::move(response)]() mutable {
        self->write(std::move(response));
      });
    });
  }

  void write(HttpResponse r) {
    response_ = {};
    response_.version(11);
    response_.result(static_cast<unsigned>(r.status));
    response_.set(http::field::content_type, r.content_type);
    for (const auto& [name, value] : r.headers) response_.set(name, value);
    response_.body() = std::move(r.body);
    const bool keep = keep_alive_ && !server_.stopping;
    response_.keep_alive(keep);
    response_.prepare_payload();
    stream_.expires_after(to_ms(server_.options.read_timeout));
    http::async_write(stream_, response_,
                      [self = shared_from_this(), keep](beast::error_code ec, std::size_t) {
                        if (ec) return self->close();
                        if (!keep) return self->linger_close();
                        self->wait_for_request();
                      });
  }

  // Answers a request that could not be read, then closes.
  void fail(int status, const std::string& type, const std::string& message) {
    keep_alive_ = false;
    write(error_response(status, type, message));
  }

  // Closes the sending side, then discards what the client still sends (up to 16 MB or 2 s) so
  // that a client still writing its body reads the answer instead of a reset.
  void linger_close() {
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

  beast::tcp_stream stream_;
  Server& server_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::empty_body> continue_;
  http::response<http::string_body> response_;
  std::array<char, 4096> drain_{};
  std::size_t drained_ = 0;
  Clock::time_point start_;
  bool idle_ = false;
  bool keep_alive_ = true;
};

void accept(tcp::acceptor& acceptor, Server& server) {
  acceptor.async_accept(net::make_strand(server.ioc),
                        [&acceptor, &server](beast::error_code ec, tcp::socket socket) {
                          if (!ec) {
                            beast::error_code ignored;
                            socket.set_option(tcp::no_delay(true), ignored);
                            auto session = std::make_shared<Session>(std::move(socket), server);
                            server.add(session);
                            session->start();
                          } else if (ec != net::error::operation_aborted) {
                            log_warn("serve: accept: ", ec.message());
                          }
                          if (!server.stopping && acceptor.is_open()) accept(acceptor, server);
                        });
}

}  // namespace

void serve_http(const HttpOptions& options, Service& service,
                const std::function<void(const std::string&, int)>& on_listening) {
  net::io_context ioc(options.threads);
  Server server(options, service, ioc);
  service.set_post([&ioc](std::function<void()> f) { net::post(ioc, std::move(f)); });

  tcp::acceptor acceptor(ioc);
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
  accept(acceptor, server);

  // Shutdown: stop accepting, close idle connections, and poll until every session has ended;
  // a second signal exits at once.
  net::signal_set signals(ioc, SIGINT, SIGTERM);
  net::steady_timer poll(ioc);
  std::function<void()> wait_for_sessions = [&] {
    if (server.sessions == 0) {
      signals.cancel();
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
    acceptor.close(ignored);
    {
      std::lock_guard lock(server.mu);
      for (auto& w : server.registry) {
        if (auto s = w.lock()) s->close_if_idle();
      }
    }
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
