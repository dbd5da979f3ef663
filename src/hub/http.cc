// libcurl behind HttpClient: one easy handle, no redirects followed, TLS verified.
#include "hub/http.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "base/check.h"
#include "base/error.h"

namespace bertfit::hub {
namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

// State of one perform() call, shared with libcurl's callbacks.
struct Transfer {
  const BodySink* sink = nullptr;
  HttpResult* result = nullptr;
  bool sink_failed = false;
};

size_t on_header(char* buffer, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = size * count;
  std::string_view line = trim(std::string_view(buffer, bytes));
  if (line.starts_with("HTTP/")) {
    // A new response line (an interim 1xx, or the next response): headers start over.
    t->result->headers.clear();
    const size_t space = line.find(' ');
    t->result->status =
        space == std::string_view::npos ? 0 : std::strtol(line.data() + space + 1, nullptr, 10);
  } else if (const size_t colon = line.find(':'); colon != std::string_view::npos) {
    t->result->headers.add(std::string(trim(line.substr(0, colon))),
                           std::string(trim(line.substr(colon + 1))));
  }
  return bytes;
}

size_t on_body(char* buffer, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = size * count;
  const long status = t->result->status;
  if (status < 200 || status >= 300 || t->sink == nullptr || !*t->sink) return bytes;
  if (!(*t->sink)(*t->result, buffer, bytes)) {
    t->sink_failed = true;
    return CURL_WRITEFUNC_ERROR;
  }
  return bytes;
}

Transport classify(CURLcode code, const Transfer& t) {
  switch (code) {
    case CURLE_OK:
      return Transport::kOk;
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
      return Transport::kUnreachable;
    case CURLE_OPERATION_TIMEDOUT:
      // Before any response line the host did not answer; inside a body the transfer stalled.
      return t.result->status == 0 ? Transport::kTimeout : Transport::kCut;
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return Transport::kCut;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
      return Transport::kTls;
    case CURLE_WRITE_ERROR:
      return t.sink_failed ? Transport::kSinkFailed : Transport::kOther;
    default:
      return Transport::kOther;
  }
}

struct UrlDeleter {
  void operator()(CURLU* u) const { curl_url_cleanup(u); }
};
using UrlHandle = std::unique_ptr<CURLU, UrlDeleter>;

std::string url_part(CURLU* u, CURLUPart part, unsigned flags = 0) {
  char* value = nullptr;
  if (curl_url_get(u, part, &value, flags) != CURLUE_OK || value == nullptr) return "";
  std::string s(value);
  curl_free(value);
  return s;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

void HttpHeaders::add(std::string name, std::string value) {
  items_.emplace_back(std::move(name), std::move(value));
}

std::optional<std::string> HttpHeaders::get(std::string_view name) const {
  for (auto it = items_.rbegin(); it != items_.rend(); ++it) {
    if (iequals(it->first, name)) return it->second;
  }
  return std::nullopt;
}

HttpClient::HttpClient() {
  // curl_global_init is not thread-safe in every libcurl: once per process.
  static std::once_flag once;
  std::call_once(
      once, [] { CHECK(curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK, "curl_global_init"); });
  curl_ = curl_easy_init();
  CHECK(curl_ != nullptr, "curl_easy_init failed");
}

HttpClient::~HttpClient() { curl_easy_cleanup(static_cast<CURL*>(curl_)); }

HttpResult HttpClient::perform(const HttpRequest& request, const BodySink& sink) {
  CURL* c = static_cast<CURL*>(curl_);
  curl_easy_reset(c);  // options only: live connections stay in the handle's cache
  HttpResult result;
  Transfer transfer{&sink, &result};
  char error_buffer[CURL_ERROR_SIZE] = {};

  curl_slist* headers = nullptr;
  for (const std::string& h : request.headers) headers = curl_slist_append(headers, h.c_str());
  std::unique_ptr<curl_slist, void (*)(curl_slist*)> header_list(headers, curl_slist_free_all);

  curl_easy_setopt(c, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "bertfit (huggingface_hub cache compatible)");
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, header_list.get());
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, request.connect_timeout_s);
  if (request.timeout_s > 0) curl_easy_setopt(c, CURLOPT_TIMEOUT, request.timeout_s);
  if (request.stall_s > 0) {
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, request.stall_s);
  }
  if (request.head) curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &transfer);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &transfer);

  const CURLcode code = curl_easy_perform(c);
  result.transport = classify(code, transfer);
  if (code != CURLE_OK) {
    result.transport_message = error_buffer[0] != '\0' ? error_buffer : curl_easy_strerror(code);
  }
  return result;
}

std::string url_origin(const std::string& url) {
  UrlHandle u(curl_url());
  CHECK(u != nullptr, "curl_url");
  if (curl_url_set(u.get(), CURLUPART_URL, url.c_str(), 0) != CURLUE_OK) return "";
  const std::string scheme = lower(url_part(u.get(), CURLUPART_SCHEME));
  if (scheme != "http" && scheme != "https") return "";
  return cat(scheme, "://", lower(url_part(u.get(), CURLUPART_HOST)), ":",
             url_part(u.get(), CURLUPART_PORT, CURLU_DEFAULT_PORT));
}

bool is_relative_reference(const std::string& location) {
  if (location.starts_with("//")) return false;  // a network-path reference names a host
  const size_t end = location.find_first_of(":/?#");
  if (end == std::string::npos || location[end] != ':' || end == 0) return true;
  // "scheme:" needs a letter first, then letters, digits, '+', '-', '.'.
  if (!std::isalpha(static_cast<unsigned char>(location[0]))) return true;
  return !std::all_of(location.begin(), location.begin() + static_cast<long>(end), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '+' || ch == '-' || ch == '.';
  });
}

std::string resolve_url(const std::string& base, const std::string& location) {
  UrlHandle u(curl_url());
  CHECK(u != nullptr, "curl_url");
  if (curl_url_set(u.get(), CURLUPART_URL, base.c_str(), 0) != CURLUE_OK) {
    throw_error("cannot parse the URL '", base, "'");
  }
  if (curl_url_set(u.get(), CURLUPART_URL, location.c_str(), 0) != CURLUE_OK) {
    throw_error("cannot parse the redirect location '", location, "' from ", base);
  }
  return url_part(u.get(), CURLUPART_URL);
}

std::string url_quote(std::string_view s, bool keep_slash) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    const auto b = static_cast<unsigned char>(ch);
    if (std::isalnum(b) || ch == '-' || ch == '.' || ch == '_' || ch == '~' ||
        (keep_slash && ch == '/')) {
      out += ch;
    } else {
      out += '%';
      out += kHex[b >> 4];
      out += kHex[b & 15];
    }
  }
  return out;
}

}  // namespace bertfit::hub
