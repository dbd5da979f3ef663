// The HTTP/1.1 front of `bertfit serve` (Boost.Beast over Asio; the only file that includes an
// HTTP library). A few connection threads run every socket asynchronously: no thread waits on
// a client, and a request waiting for the compute worker holds only its socket. Keep-alive;
// an idle connection is closed after idle_timeout, a request must arrive whole within
// read_timeout of its first byte, an answer must be written within read_timeout. Headers over
// max_header_bytes get 431, bodies over max_body_bytes 413, unparsable requests 400; each then
// closes the connection. SIGINT / SIGTERM: stop accepting, close idle connections, answer the
// requests already read, then return.
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
};

// Serves service until SIGINT or SIGTERM, then returns once every request read has been
// answered. on_listening(host, port) is called when the socket listens (port resolved when 0).
// Throws Error if the address cannot be bound.
void serve_http(const HttpOptions& options, Service& service,
                const std::function<void(const std::string& host, int port)>& on_listening);

}  // namespace bertfit::serve
