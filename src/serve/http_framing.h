// How `bertfit serve` decides where a request ends (RFC 9112 §6): the rules its header must pass
// before any body is read, and, for tests and the fuzzer, one request parsed from bytes exactly
// as the server's connections parse it (same parser, limits and rules; no socket).
//
// A request may carry a body by Content-Length or by `Transfer-Encoding: chunked`, never both,
// and chunked must be the only coding (the server decodes no other). Anything else, including
// `xchunked`, `chunked, identity` or two Transfer-Encoding lines, is refused with 400 and the
// connection closed: reading such a body one way when a proxy in front read it another is how a
// second request is smuggled inside the first.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bertfit::serve {

// A request the server refuses before reading its body (then it closes the connection).
struct FramingError {
  int status;          // 400, 413, 431
  std::string reason;  // what /metrics counts it under
  std::string message;
};

// The framing headers of one request: each Transfer-Encoding line's value, and how many
// Content-Length lines it has.
struct FramingHeaders {
  std::vector<std::string> transfer_encoding;
  int content_length_lines = 0;
};

// nullopt when the request may be read; else why not.
std::optional<FramingError> check_framing(const FramingHeaders& headers);

struct HttpLimits {
  std::size_t max_header_bytes = 16 << 10;
  std::size_t max_body_bytes = 2 << 20;
};

// One request parsed from the start of bytes: complete (method, target, body and the number of
// bytes it took), refused (error set), or incomplete (neither: more bytes are needed).
struct ParsedRequest {
  bool complete = false;
  std::optional<FramingError> error;
  std::string method, target, body;
  std::size_t consumed = 0;
  bool chunked = false;  // its body came chunked
};
ParsedRequest parse_request(std::string_view bytes, const HttpLimits& limits);

}  // namespace bertfit::serve
