// libFuzzer target: arbitrary bytes as what a client sends on a connection, parsed request after
// request by serve/http_framing.h exactly as the server's connections parse them (Beast's parser,
// the size limits, the Transfer-Encoding and Content-Length rules). Checks: a refusal is a 4xx
// with a reason and a message; a complete request consumed bytes that were there, its body is
// within the limit, and if its header named a Transfer-Encoding, that was exactly one `chunked`
// and no Content-Length came with it (the framing a second reader could read otherwise is never
// accepted). Short inputs are also tried with a framed prefix so the mutator reaches chunk sizes
// and bodies quickly.
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "serve/http_framing.h"

namespace {

using bertfit::serve::HttpLimits;
using bertfit::serve::ParsedRequest;

const HttpLimits kLimits{2048, 256};

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// The header block of the request at the start of bytes, lower-cased (up to the blank line).
std::string header_of(std::string_view bytes) {
  const auto end = bytes.find("\r\n\r\n");
  return lower(bytes.substr(0, end == std::string_view::npos ? bytes.size() : end));
}

void check(std::string_view bytes) {
  for (int requests = 0; requests < 8 && !bytes.empty(); ++requests) {
    const ParsedRequest r = bertfit::serve::parse_request(bytes, kLimits);
    if (r.error) {
      if (r.error->status < 400 || r.error->status > 499) std::abort();
      if (r.error->reason.empty() || r.error->message.empty()) std::abort();
      if (r.complete) std::abort();
      return;  // the server answers and closes: nothing after is read
    }
    if (!r.complete) return;  // waits for more bytes
    if (r.consumed == 0 || r.consumed > bytes.size()) std::abort();
    if (r.body.size() > kLimits.max_body_bytes) std::abort();
    const std::string header = header_of(bytes.substr(0, r.consumed));
    if (header.find("\ntransfer-encoding:") != std::string::npos) {
      if (!r.chunked) std::abort();
      if (header.find("\ncontent-length:") != std::string::npos) std::abort();
    }
    bytes.remove_prefix(r.consumed);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  check(bytes);
  if (size < 512) {
    check("POST /predict HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
          std::string(bytes));
    check("POST /predict HTTP/1.1\r\nHost: x\r\n" + std::string(bytes));
  }
  return 0;
}
