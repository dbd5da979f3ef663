// HTTP for the Hub client: the only user of libcurl in bertfit. One request at a time on one
// easy handle (connections are kept alive between requests), http and https only, TLS peers and
// host names verified. It never follows a redirect by itself: the caller decides which to
// follow and whether the token goes along (a token must not follow a redirect to another host,
// and libcurl's own redirect handling would re-send custom headers there).
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bertfit::hub {

// Response headers in arrival order; names compare case-insensitively.
class HttpHeaders {
 public:
  void add(std::string name, std::string value);
  void clear() { items_.clear(); }
  // The last value received for name, or nullopt.
  std::optional<std::string> get(std::string_view name) const;

 private:
  std::vector<std::pair<std::string, std::string>> items_;
};

// How a request ended below HTTP.
enum class Transport {
  kOk,           // a complete response (any status)
  kUnreachable,  // no answer from the host: name resolution, refused, connect timeout, proxy
  kTls,          // certificate or handshake failure
  kCut,          // the connection broke or stalled inside the body: the transfer can resume
  kTimeout,      // the whole-request time limit passed
  kSinkFailed,   // the body sink returned false
  kOther,
};

struct HttpRequest {
  bool head = false;  // HEAD, else GET
  std::string url;
  std::vector<std::string> headers;  // "Name: value" lines
  long timeout_s = 0;                // limit for the whole request; 0: none
  long stall_s = 0;                  // give up when under 1 byte/s for this long; 0: never
  long connect_timeout_s = 10;
};

struct HttpResult {
  Transport transport = Transport::kOk;
  std::string transport_message;  // libcurl's description of a failure, for error messages
  long status = 0;                // 0 when no response line arrived
  HttpHeaders headers;
};

// Receives the body of a 2xx response as it arrives, with the response's status and headers so
// far (bodies of other statuses are discarded); returns false to stop the transfer (a write
// failure of the caller's).
using BodySink =
    std::function<bool(const HttpResult& response, const char* data, std::size_t size)>;

class HttpClient {
 public:
  HttpClient();
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  HttpResult perform(const HttpRequest& request, const BodySink& sink = {});

 private:
  void* curl_;  // CURL*
};

// "scheme://host:port" in lower case with the default port made explicit, so two URLs of the
// same origin compare equal; "" when url is not an absolute http(s) URL.
std::string url_origin(const std::string& url);

// True for a Location with neither scheme nor authority ("/org/new/resolve/main/x"): a path on
// the same host, the only redirect huggingface_hub follows for its metadata HEAD
// (`urlparse(location).netloc == ""` in file_download.py).
bool is_relative_reference(const std::string& location);

// location resolved against base (RFC 3986); throws Error when either cannot be parsed.
std::string resolve_url(const std::string& base, const std::string& location);

// Percent-encodes every byte but the unreserved characters (A-Z a-z 0-9 - . _ ~), and '/' when
// keep_slash: Python's urllib.parse.quote with safe="/" or safe="", as hf_hub_url uses them.
std::string url_quote(std::string_view s, bool keep_slash);

}  // namespace bertfit::hub
