// The Beast side of the framing rules (http_framing.h), shared by the server's connections
// (http_server.cc) and parse_request (http_framing.cc), so that both read a request alike.
// Included by those two files only: the one place Boost.Beast is named.
#pragma once

// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility> (GCC 12, C++20).
#include <utility>
//
#include <boost/beast/http.hpp>

#include "serve/http_framing.h"

namespace bertfit::serve::beast_detail {

namespace http = boost::beast::http;
using RequestParser = http::request_parser<http::string_body>;

// The framing headers of a parsed request header.
FramingHeaders framing_headers(const http::request_header<>& header);

// A parser with the server's limits.
void set_limits(RequestParser& parser, const HttpLimits& limits);

// The refusal for an error of Beast's parser; nullopt for errors no answer can be sent for (the
// stream ended or a partial message: the client is gone).
std::optional<FramingError> parse_error(const boost::system::error_code& ec,
                                        const HttpLimits& limits);

}  // namespace bertfit::serve::beast_detail
