// TensorBoard event files without TensorFlow: scalars written as TensorBoard's own writer writes
// them (an `events.out.tfevents.TIME.HOST` file of TFRecords: a little-endian uint64 length, its
// masked CRC-32C, the record, its masked CRC-32C; each record an Event protobuf: wall_time,
// step, and a Summary with one Value{tag, simple_value}; the first record says
// file_version "brain.Event:2"), and read back with every CRC checked, for tests and for
// `bertfit report`. The three protobuf messages are encoded by hand (a dozen varints and fixed
// fields): a protobuf dependency and generated code for them would be larger than the encoder.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace bertfit::report {

// CRC-32C (Castagnoli, reflected, as TFRecord uses) and TFRecord's mask of it.
std::uint32_t crc32c(std::string_view data);
std::uint32_t masked_crc32c(std::string_view data);

class EventWriter {
 public:
  // Creates dir if needed and a new event file in it; throws Error naming the path on failure.
  explicit EventWriter(const std::string& dir);
  ~EventWriter();
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  void scalar(const std::string& tag, std::int64_t step, double value, double wall_time);
  void flush();
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& event);
  std::string path_;
  std::FILE* file_ = nullptr;
};

struct ScalarEvent {
  std::string tag;
  std::int64_t step = 0;
  float value = 0;
  double wall_time = 0;
};

struct EventFile {
  std::string file_version;  // from the first record
  std::vector<ScalarEvent> scalars;
};

// Every record of an event file, each length and payload CRC checked; throws Error naming the
// file and the record's offset on a bad CRC, a truncated record or a malformed protobuf.
EventFile read_event_file(const std::string& path);

}  // namespace bertfit::report
