// The HTTP/1.1 front of `bertfit serve` (Boost.Beast over Asio, here and in http_framing.cc
// alone). A few connection threads run every socket asynchronously: no thread waits on a client,
// and a request waiting for the compute worker holds only its socket. Keep-alive; an idle
// connection is closed after idle_timeout, a request must arrive whole within read_timeout of its
// first byte, an answer must be written within read_timeout. Headers over max_header_bytes get
// 431, bodies over max_body_bytes 413, unparsable or ambiguously framed requests 400
// (http_framing.h); each then closes the connection. No connection keeps an answer once it is
// written, nor a large read buffer between requests. `Expect: 100-continue` gets its 100 only
// from an HTTP/1.1 request with a body; HEAD is answered with the headers alone. While a
// request is being answered its connection is watched: a client that closes it has gone
// (HttpRequest::client_gone), and its queued work is dropped.
//
// At most max_connections connections are open: a new one beyond it takes the place of the
// connection idle the longest, or is closed at once when none is idle. When the process runs out
// of descriptors (EMFILE/ENFILE), the acceptor frees an idle connection and waits 50 ms before it
// accepts again (no spin), warning at most once per 10 s. Every refusal and timeout is counted in
// /metrics (Metrics::rejection).
//
// SIGINT / SIGTERM: stop accepting, close idle connections, answer the requests already read;
// connections still sending a request get shutdown_grace seconds (at most read_timeout) to finish
// it, then are closed; then return.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "serve/service.h"

namespace bertfit::serve {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;           // 0: any free port
  int threads = 1;           // connection threads (they also tokenize)
  double read_timeout = 30;  // seconds
  double idle_timeout = 60;  // seconds
  std::size_t max_body_bytes = 2 << 20;
  std::size_t max_header_bytes = 16 << 10;
  int max_connections = 1024;
  double shutdown_grace = 2;  // seconds
};

// Serves service until SIGINT or SIGTERM, then returns once every request read has been
// answered. on_listening(host, port) is called when the socket listens (port resolved when 0).
// Throws Error if the address cannot be bound.
void serve_http(const HttpOptions& options, Service& service,
                const std::function<void(const std::string& host, int port)>& on_listening);

}  // namespace bertfit::serve
