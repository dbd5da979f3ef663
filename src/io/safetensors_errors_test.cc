// Every malformed safetensors header the parser must reject, each with a message that names the
// file and, where one is at fault, the tensor.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "base/error.h"
#include "base/file.h"
#include "io/safetensors.h"

namespace bertfit {
namespace {

const std::string kSource = "broken.safetensors";

std::string build_file(const std::string& header, std::size_t data_bytes) {
  std::uint64_t n = header.size();
  return std::string(reinterpret_cast<const char*>(&n), 8) + header + std::string(data_bytes, '\0');
}

// Parses and returns the Error message ("" if no error was thrown).
std::string parse_error(const std::string& file) {
  try {
    parse_safetensors_header(std::as_bytes(std::span(file.data(), file.size())), kSource);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Expects an Error whose message names the file, the given tensor (if any) and contains `what`.
void expect_error(const std::string& header, std::size_t data_bytes, const std::string& tensor,
                  const std::string& what) {
  std::string msg = parse_error(build_file(header, data_bytes));
  ASSERT_FALSE(msg.empty()) << "no error for header " << header;
  EXPECT_NE(msg.find(kSource), std::string::npos) << msg;
  if (!tensor.empty()) {
    EXPECT_NE(msg.find("'" + tensor + "'"), std::string::npos) << msg;
  }
  EXPECT_NE(msg.find(what), std::string::npos) << msg;
}

std::string entry(const std::string& name, const std::string& body) {
  return "\"" + name + "\":{" + body + "}";
}

TEST(SafetensorsErrors, TruncatedFileAndHeaderLength) {
  for (std::size_t n : {0, 1, 7}) {
    std::string msg = parse_error(std::string(n, '\0'));
    EXPECT_NE(msg.find(kSource), std::string::npos) << msg;
    EXPECT_NE(msg.find("shorter than the 8-byte"), std::string::npos) << msg;
  }
  std::string file = build_file("{}", 0);
  std::uint64_t too_long = 3;
  std::memcpy(file.data(), &too_long, 8);
  EXPECT_NE(parse_error(file).find("runs past the end"), std::string::npos);
  too_long = ~std::uint64_t{0};
  std::memcpy(file.data(), &too_long, 8);
  EXPECT_NE(parse_error(file).find("runs past the end"), std::string::npos);
}

TEST(SafetensorsErrors, InvalidJsonAndNonObject) {
  expect_error("{\"a\":", 0, "", "not valid JSON");
  expect_error("", 0, "", "not valid JSON");
  expect_error("[1,2]  ", 0, "", "not a JSON object");
  expect_error("\"x\"", 0, "", "not a JSON object");
  expect_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[[[1]]],\"data_offsets\":[0,4]}}", 4, "",
               "nests deeper");
}

TEST(SafetensorsErrors, MissingOrIllTypedFields) {
  expect_error("{" + entry("t", R"("shape":[1],"data_offsets":[0,4])") + "}", 4, "t",
               "missing \"dtype\"");
  expect_error("{" + entry("t", R"("dtype":"F32","data_offsets":[0,4])") + "}", 4, "t",
               "missing \"shape\"");
  expect_error("{" + entry("t", R"("dtype":"F32","shape":[1])") + "}", 4, "t",
               "missing \"data_offsets\"");
  expect_error("{" + entry("t", R"("dtype":5,"shape":[1],"data_offsets":[0,4])") + "}", 4, "t",
               "\"dtype\" must be a string");
  expect_error("{" + entry("t", R"("dtype":"F32","shape":1,"data_offsets":[0,4])") + "}", 4, "t",
               "\"shape\" must be an array");
  expect_error("{" + entry("t", R"("dtype":"F32","shape":[1],"data_offsets":[0])") + "}", 4, "t",
               "\"data_offsets\" must be an array [begin, end]");
  expect_error("{" + entry("t", R"("dtype":"F32","shape":[1],"data_offsets":{"a":1})") + "}", 4,
               "t", "\"data_offsets\" must be an array [begin, end]");
  expect_error(R"({"t":[1,2]})", 0, "t", "must be an object");
}

TEST(SafetensorsErrors, UnknownDtype) {
  expect_error("{" + entry("w", R"("dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1])") + "}", 1,
               "w", "unknown or unsupported dtype 'F8_E4M3'");
}

TEST(SafetensorsErrors, BadShapes) {
  expect_error("{" + entry("w", R"("dtype":"F32","shape":[-1],"data_offsets":[0,4])") + "}", 4, "w",
               "negative");
  expect_error("{" + entry("w", R"("dtype":"F32","shape":[1.5],"data_offsets":[0,4])") + "}", 4,
               "w", "non-negative integers");
  expect_error("{" + entry("w", R"("dtype":"F32","shape":["1"],"data_offsets":[0,4])") + "}", 4,
               "w", "non-negative integers");
  expect_error(
      "{" + entry("w", R"("dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4])") +
          "}",
      4, "w", "too large");
}

TEST(SafetensorsErrors, BadOffsets) {
  expect_error("{" + entry("w", R"("dtype":"F32","shape":[1],"data_offsets":[0,8])") + "}", 4, "w",
               "run past the data section");
  expect_error("{" + entry("w", R"("dtype":"F32","shape":[0],"data_offsets":[8,4])") + "}", 8, "w",
               "begin after end");
  expect_error("{" + entry("w", R"("dtype":"F32","shape":[1],"data_offsets":[-4,0])") + "}", 4, "w",
               "negative");
  expect_error("{" + entry("w", R"("dtype":"F32","shape":[2],"data_offsets":[0,4])") + "}", 8, "w",
               "needs 8 bytes");
  expect_error("{" + entry("w", R"("dtype":"BF16","shape":[3],"data_offsets":[0,4])") + "}", 8, "w",
               "needs 6 bytes");
}

TEST(SafetensorsErrors, OverlappingTensors) {
  std::string header = "{" + entry("a", R"("dtype":"F32","shape":[2],"data_offsets":[0,8])") + "," +
                       entry("b", R"("dtype":"F32","shape":[2],"data_offsets":[4,12])") + "}";
  std::string msg = parse_error(build_file(header, 12));
  EXPECT_NE(msg.find("overlaps"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'a'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'b'"), std::string::npos) << msg;
  // Containment is an overlap too; touching ranges and zero-sized tensors are not.
  expect_error("{" + entry("big", R"("dtype":"U8","shape":[10],"data_offsets":[0,10])") + "," +
                   entry("small", R"("dtype":"U8","shape":[2],"data_offsets":[3,5])") + "}",
               10, "small", "overlaps");
  std::string ok = "{" + entry("a", R"("dtype":"U8","shape":[4],"data_offsets":[0,4])") + "," +
                   entry("z", R"("dtype":"F32","shape":[0],"data_offsets":[2,2])") + "," +
                   entry("b", R"("dtype":"U8","shape":[4],"data_offsets":[4,8])") + "}";
  EXPECT_EQ(parse_error(build_file(ok, 8)), "");
}

TEST(SafetensorsErrors, DuplicateTensorName) {
  expect_error("{" + entry("a", R"("dtype":"U8","shape":[1],"data_offsets":[0,1])") + "," +
                   entry("a", R"("dtype":"U8","shape":[1],"data_offsets":[1,2])") + "}",
               2, "a", "appears twice");
}

TEST(SafetensorsErrors, Metadata) {
  expect_error(R"({"__metadata__":{"format":1}})", 0, "", "must be a string");
  expect_error(R"({"__metadata__":["pt"]})", 0, "", "\"__metadata__\" must be an object");
  std::string file = build_file(R"({"__metadata__":{"format":"pt"}}   )", 0);
  auto header =
      parse_safetensors_header(std::as_bytes(std::span(file.data(), file.size())), kSource);
  EXPECT_EQ(header.metadata.at("format"), "pt");
  EXPECT_TRUE(header.tensors.empty());
}

TEST(SafetensorsErrors, OpenReportsThePath) {
  auto dir =
      std::filesystem::temp_directory_path() / ("bertfit_io_err_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string path = (dir / "bad.safetensors").string();
  write_file_atomic(
      path,
      build_file("{" + entry("x", R"("dtype":"F32","shape":[3],"data_offsets":[0,4])") + "}", 4));
  try {
    SafetensorsFile::open(path);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'x'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(SafetensorsFile::open(dir.string()), Error);  // a directory
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace bertfit
