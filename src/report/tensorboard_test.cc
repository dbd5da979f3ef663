// TensorBoard event files: CRC-32C against its published check value, the record framing and the
// Event protobuf bytes against an encoding written out by hand from the .proto field numbers, a
// round trip through the reader, and corrupt or truncated files refused with the byte offset.
#include "report/tensorboard.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "base/error.h"
#include "base/file.h"
#include "tests/util/temp_dir.h"

namespace bertfit::report {
namespace {

TEST(TensorBoard, Crc32cCheckValueAndMask) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);  // the CRC-32C check value (RFC 3720 B.4)
  EXPECT_EQ(crc32c(""), 0u);
  const std::uint32_t c = crc32c("abc");
  EXPECT_EQ(masked_crc32c("abc"), ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

std::string only_file(const std::string& dir) {
  std::string found;
  for (const auto& e : std::filesystem::directory_iterator(dir)) found = e.path().string();
  return found;
}

TEST(TensorBoard, RecordsAreTheEventProtobufInTfRecordFraming) {
  testing::TempDir tmp;
  std::string path;
  {
    EventWriter w(tmp / "runs");
    w.scalar("a", 3, 2.0, 1.5);
    w.flush();
    path = w.path();
  }
  EXPECT_NE(path.find("events.out.tfevents."), std::string::npos);
  EXPECT_EQ(only_file(tmp / "runs"), path);
  const std::string bytes = read_file(path);
  // Event{wall_time: 1.5 (field 1, fixed64), step: 3 (field 2, varint), summary (field 5) {
  //   value (field 1) { tag: "a" (field 1), simple_value: 2.0f (field 2, fixed32) } }}
  const std::string event(
      "\x09\x00\x00\x00\x00\x00\x00\xf8\x3f"
      "\x10\x03"
      "\x2a\x0a"
      "\x0a\x08"
      "\x0a\x01\x61"
      "\x15\x00\x00\x00\x40",
      23);
  ASSERT_GE(bytes.size(), 16u + event.size());
  const std::string last = bytes.substr(bytes.size() - (16 + event.size()));
  std::uint64_t length;
  std::memcpy(&length, last.data(), 8);
  EXPECT_EQ(length, event.size());
  std::uint32_t crc;
  std::memcpy(&crc, last.data() + 8, 4);
  EXPECT_EQ(crc, masked_crc32c(last.substr(0, 8)));
  EXPECT_EQ(last.substr(12, event.size()), event);
  std::memcpy(&crc, last.data() + 12 + event.size(), 4);
  EXPECT_EQ(crc, masked_crc32c(event));
}

TEST(TensorBoard, RoundTripAndCorruption) {
  testing::TempDir tmp;
  std::string path;
  {
    EventWriter w(tmp.path());
    w.scalar("train/loss", 10, 0.6931, 1000.25);
    w.scalar("eval/accuracy", 20, 0.875, 1001.5);
    w.scalar("train/learning_rate", 1LL << 40, 2e-5, 1002);
    path = w.path();
  }
  EventFile f = read_event_file(path);
  EXPECT_EQ(f.file_version, "brain.Event:2");
  ASSERT_EQ(f.scalars.size(), 3u);
  EXPECT_EQ(f.scalars[0].tag, "train/loss");
  EXPECT_EQ(f.scalars[0].step, 10);
  EXPECT_FLOAT_EQ(f.scalars[0].value, 0.6931f);
  EXPECT_DOUBLE_EQ(f.scalars[0].wall_time, 1000.25);
  EXPECT_EQ(f.scalars[1].tag, "eval/accuracy");
  EXPECT_EQ(f.scalars[2].step, 1LL << 40);
  EXPECT_FLOAT_EQ(f.scalars[2].value, 2e-5f);

  std::string bytes = read_file(path);
  std::string bad = bytes;
  bad[bad.size() - 10] ^= 0x01;  // inside the last record's payload
  write_file_atomic(tmp / "bad", bad);
  try {
    read_event_file(tmp / "bad");
    ADD_FAILURE() << "a corrupt record was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CRC"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("at byte"), std::string::npos) << e.what();
  }
  write_file_atomic(tmp / "short", bytes.substr(0, bytes.size() - 3));
  EXPECT_THROW(read_event_file(tmp / "short"), Error);
}

}  // namespace
}  // namespace bertfit::report
