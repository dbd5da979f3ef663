// JSON helpers: errors name the file, the line/column of a syntax error, and the key.
#include "io/json.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "tests/util/errors.h"

namespace bertfit {
namespace {

using testing::error_of;

TEST(Json, SyntaxErrorNamesFileLineAndColumn) {
  std::string msg = error_of([] { parse_json_text("{\n  \"a\": 1,\n  oops\n}", "cfg.json"); });
  EXPECT_NE(msg.find("cfg.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("line 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("column"), std::string::npos) << msg;
}

TEST(Json, MissingFileNamesPath) {
  std::string msg = error_of([] { read_json_file("/no/such/config.json"); });
  EXPECT_NE(msg.find("/no/such/config.json"), std::string::npos) << msg;
}

TEST(Json, TypedAccess) {
  auto j = parse_json_text(R"({"i": 3, "f": 0.5, "b": true, "s": "x", "big": 9999999999})", "t");
  EXPECT_EQ(json_int(j, "i", "t"), 3);
  EXPECT_EQ(json_number(j, "f", "t"), 0.5);
  EXPECT_EQ(json_number(j, "i", "t"), 3.0);
  EXPECT_TRUE(json_bool(j, "b", "t"));
  EXPECT_EQ(json_string(j, "s", "t"), "x");
  EXPECT_NE(error_of([&] { json_int(j, "f", "t"); }).find("key 'f' must be an integer"),
            std::string::npos);
  EXPECT_NE(error_of([&] { json_int(j, "big", "t"); }).find("too large"), std::string::npos);
  EXPECT_NE(error_of([&] { json_bool(j, "i", "t"); }).find("'i'"), std::string::npos);
  EXPECT_NE(error_of([&] { json_string(j, "nope", "t"); }).find("missing key 'nope'"),
            std::string::npos);
}

}  // namespace
}  // namespace bertfit
