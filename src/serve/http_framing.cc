// Request framing rules and the socket-free request parser (see http_framing.h).
#include "serve/http_framing.h"

#include <algorithm>
#include <cctype>

#include "base/error.h"
#include "serve/http_beast.h"

namespace bertfit::serve {
namespace {

// value without leading and trailing spaces and tabs (a header value's optional white space).
std::string_view trimmed(std::string_view value) {
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  return value;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

std::optional<FramingError> check_framing(const FramingHeaders& headers) {
  if (headers.transfer_encoding.empty()) return std::nullopt;
  if (headers.transfer_encoding.size() > 1 ||
      !iequals(trimmed(headers.transfer_encoding[0]), "chunked")) {
    std::string all;
    for (const std::string& v : headers.transfer_encoding) all += (all.empty() ? "" : ", ") + v;
    return FramingError{400, "bad_framing",
                        "Transfer-Encoding must be exactly `chunked`, not `" + all + "`"};
  }
  if (headers.content_length_lines > 0) {
    return FramingError{400, "bad_framing",
                        "a request cannot have both Transfer-Encoding and Content-Length"};
  }
  return std::nullopt;
}

namespace beast_detail {

FramingHeaders framing_headers(const http::request_header<>& header) {
  FramingHeaders h;
  for (const auto& field : header) {
    if (field.name() == http::field::transfer_encoding) {
      h.transfer_encoding.emplace_back(field.value());
    } else if (field.name() == http::field::content_length) {
      ++h.content_length_lines;
    }
  }
  return h;
}

void set_limits(RequestParser& parser, const HttpLimits& limits) {
  parser.header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
  parser.body_limit(limits.max_body_bytes);
}

std::optional<FramingError> parse_error(const boost::system::error_code& ec,
                                        const HttpLimits& limits) {
  if (ec == http::error::body_limit) {
    return FramingError{413, "body_limit",
                        cat("the request body is over ", limits.max_body_bytes, " bytes")};
  }
  if (ec == http::error::header_limit) {
    return FramingError{431, "header_limit",
                        cat("the request headers are over ", limits.max_header_bytes, " bytes")};
  }
  if (ec.category() == http::make_error_code(http::error::bad_method).category() &&
      ec != http::error::end_of_stream && ec != http::error::partial_message &&
      ec != http::error::need_more) {
    return FramingError{400, "malformed_http", "malformed HTTP request: " + ec.message()};
  }
  return std::nullopt;
}

}  // namespace beast_detail

ParsedRequest parse_request(std::string_view bytes, const HttpLimits& limits) {
  using namespace beast_detail;
  ParsedRequest out;
  RequestParser parser;
  set_limits(parser, limits);
  parser.eager(false);  // stop after the header, as the server does, to check its framing
  std::size_t used = 0;
  bool checked = false;
  while (!parser.is_done()) {
    boost::system::error_code ec;
    const std::size_t n =
        parser.put(boost::asio::buffer(bytes.data() + used, bytes.size() - used), ec);
    used += n;
    if (ec == http::error::need_more) return out;  // incomplete
    if (ec) {
      out.error = parse_error(ec, limits);
      if (!out.error) out.error = FramingError{400, "malformed_http", ec.message()};
      return out;
    }
    const bool header_now = parser.is_header_done() && !checked;
    if (header_now) {
      checked = true;
      out.error = check_framing(framing_headers(parser.get().base()));
      if (out.error) return out;
      parser.eager(true);
    }
    if (n == 0 && !header_now && !parser.is_done()) return out;  // no progress: incomplete
  }
  out.complete = true;
  out.method = std::string(parser.get().method_string());
  out.target = std::string(parser.get().target());
  out.body = std::move(parser.get().body());
  out.chunked = parser.chunked();
  out.consumed = used;
  return out;
}

}  // namespace bertfit::serve
