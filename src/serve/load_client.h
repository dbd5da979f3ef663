// A closed-loop HTTP load generator for measuring a running `bertfit serve` (used by `bertfit
// tune`): N keep-alive connections, one thread each, each sending its next POST as soon as the
// previous answer arrived. After a warm-up, answers are counted in a measuring window and their
// latencies summarized (nearest-rank percentiles). Its own library target (bertfit_serve_load:
// Boost.Beast/Asio and threads, no model), so that a tuner links it without the server.
//
// Window rule: every connection shares one start time; warm-up ends at start + warmup_s; the
// window runs from there for measure_s, extended (up to 3 × measure_s) until min_requests answers
// were counted. A request counts if it was sent after warm-up ended and its answer (or failure)
// arrived before the window ended; requests still open when the window ends are abandoned.
//
// Connections: HTTP/1.1 keep-alive, `Content-Type: application/json`, TCP_NODELAY. A connection
// the server closes (an answer with `Connection: close`, or a kept connection found closed when
// the next request is sent) is reopened; a request that fails on a reused connection because it
// was closed is sent once more on a new one and is an error only if that fails too. After a
// failed connect a connection waits 10 ms before it tries again (no spin against a dead port).
// A latency runs from writing the request to the end of its answer: connecting is not part of it,
// and a request sent again is timed from its second try (which is also its send time).
#pragma once

#include <string>
#include <vector>

namespace bertfit::serve {

struct LoadSpec {
  std::string host = "127.0.0.1";   // the server's address (a name is resolved once per connection)
  int port = 0;                     // the server's port (> 0)
  std::string target = "/predict";  // POST target (starts with '/')
  // JSON request bodies, sent in turn: request k (counted over all connections, in the order
  // they are started) gets bodies[k % size]; must be non-empty.
  std::vector<std::string> bodies;
  // Closed loop: each keep-alive connection sends its next request when the previous answer
  // arrived (one std::thread per connection, 1..256).
  int connections = 1;
  double warmup_s = 1.0;   // requests during warm-up are sent but not counted (>= 0)
  double measure_s = 3.0;  // the measuring window (> 0)
  // The window is extended (up to 3 × measure_s in total) until at least this many answers (any
  // status) were counted (>= 0).
  long min_requests = 200;
  double connect_timeout_s = 10;  // one connect (resolve excluded) (> 0)
  double request_timeout_s = 30;  // one request: writing it and reading its answer (> 0)
};

struct LoadResult {
  long requests = 0;  // answers counted in the window (any status; socket failures excluded)
  long errors = 0;    // non-2xx answers + socket/timeout failures in the window
  // The earliest error of the window, e.g. "HTTP 429: {...first 200 bytes of body}",
  // "connect: Connection refused", "read: end of stream" (empty if none).
  std::string first_error;
  double seconds = 0;  // length of the measuring window actually used
  // Latency (from writing the request to the end of its answer) of the counted 2xx answers,
  // nearest-rank percentiles; 0 when there are none.
  double p50_ms = 0, p90_ms = 0, p99_ms = 0, mean_ms = 0, max_ms = 0;
  double requests_per_s = 0;  // counted 2xx answers / seconds
  // The median 2xx latency of the window's first and second halves (by answer time) agree within
  // 5% (|a - b| <= 0.05 × min(a, b)), and requests >= min_requests.
  bool steady = false;
};

// Drives the load described by spec and measures it; blocks for warmup_s + the window (requests
// still open at its end are abandoned, not waited for; only a host name's resolution cannot be
// cut short). Throws bertfit::Error (one line naming the field) for a bad spec (no bodies,
// connections < 1 or > 256, port outside 1..65535, a target without '/', a negative or zero
// duration); network failures are counted in errors, never thrown.
LoadResult run_http_load(const LoadSpec& spec);

}  // namespace bertfit::serve
