// Request framing (RFC 9112 §6) as the server's connections apply it: Content-Length or exactly
// `Transfer-Encoding: chunked`, never both, any other coding refused before the body is read (so
// nothing after it can be read as a second request), and the size limits.
#include "serve/http_framing.h"

#include <gtest/gtest.h>

#include <string>

namespace bertfit::serve {
namespace {

const HttpLimits kLimits{1024, 64};

ParsedRequest parse(const std::string& bytes) { return parse_request(bytes, kLimits); }

std::string post(const std::string& headers, const std::string& body) {
  return "POST /predict HTTP/1.1\r\nHost: x\r\n" + headers + "\r\n" + body;
}

TEST(HttpFraming, ContentLengthAndChunkedBodies) {
  ParsedRequest r = parse(post("Content-Length: 5\r\n", "hello") + "GET /info HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/predict");
  EXPECT_EQ(r.body, "hello");
  EXPECT_FALSE(r.chunked);
  // The next request starts where this one ended.
  EXPECT_EQ(r.consumed, post("Content-Length: 5\r\n", "hello").size());

  r = parse(post("Transfer-Encoding: chunked\r\n", "3\r\nhel\r\n2\r\nlo\r\n0\r\n\r\n"));
  ASSERT_TRUE(r.complete) << (r.error ? r.error->message : "incomplete");
  EXPECT_EQ(r.body, "hello");
  EXPECT_TRUE(r.chunked);
  // The coding's name is case-insensitive, with optional white space.
  EXPECT_TRUE(parse(post("Transfer-Encoding:  Chunked \r\n", "0\r\n\r\n")).complete);
  // No body at all.
  r = parse("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(r.complete);
  EXPECT_TRUE(r.body.empty());
}

TEST(HttpFraming, AnyOtherTransferEncodingIsRefused) {
  for (const std::string te : {"xchunked", "chunked, identity", "chunked, gzip", "gzip", "identity",
                               "gzip, chunked", "chunked;x=1", ""}) {
    ParsedRequest r = parse(post("Transfer-Encoding: " + te + "\r\n", "0\r\n\r\n"));
    ASSERT_TRUE(r.error) << te;
    EXPECT_EQ(r.error->status, 400) << te;
    EXPECT_FALSE(r.complete) << te;
  }
  // Two lines, each `chunked`.
  ParsedRequest r =
      parse(post("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n"));
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->status, 400);
  // chunked beside Content-Length, either order.
  for (const std::string h : {"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
                              "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n"}) {
    r = parse(post(h, "0\r\n\r\n"));
    ASSERT_TRUE(r.error) << h;
    EXPECT_EQ(r.error->status, 400) << h;
  }
}

// The smuggling the server once allowed: an unknown coding was read as "no body", so the body
// became a second request. Now the first is refused before its body is read.
TEST(HttpFraming, ASmuggledRequestIsNeverParsed) {
  const std::string smuggled = "GET /info HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string body = std::to_string(smuggled.size()) + "\r\n" + smuggled + "\r\n0\r\n\r\n";
  ParsedRequest r = parse(post("Transfer-Encoding: xchunked\r\n", body));
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->status, 400);
  EXPECT_EQ(r.error->reason, "bad_framing");
  EXPECT_NE(r.error->message.find("xchunked"), std::string::npos) << r.error->message;
}

TEST(HttpFraming, LimitsAndMalformedRequests) {
  ParsedRequest r = parse(post("Content-Length: 65\r\n", std::string(65, 'a')));
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->status, 413);
  // A chunked body over the limit, and a chunk size that overflows.
  r = parse(
      post("Transfer-Encoding: chunked\r\n", "41\r\n" + std::string(65, 'a') + "\r\n0\r\n\r\n"));
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->status, 413);
  r = parse(post("Transfer-Encoding: chunked\r\n", "fffffffffffffffffffff\r\na\r\n"));
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->status / 100, 4);
  r = parse(post("X-Filler: " + std::string(2000, 'a') + "\r\n", ""));
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->status, 431);
  for (const std::string bad :
       {"\x01\x02 nonsense\r\n\r\n", "POST /x HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        "POST /x HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"}) {
    r = parse(bad);
    ASSERT_TRUE(r.error) << bad;
    EXPECT_EQ(r.error->status, 400) << bad;
  }
  // Incomplete: neither an answer nor an error.
  r = parse(post("Content-Length: 10\r\n", "abc"));
  EXPECT_FALSE(r.complete);
  EXPECT_FALSE(r.error);
  r = parse("POST /predict HTTP/1.1\r\nHost: x\r\nContent-Le");
  EXPECT_FALSE(r.complete);
  EXPECT_FALSE(r.error);
}

}  // namespace
}  // namespace bertfit::serve
