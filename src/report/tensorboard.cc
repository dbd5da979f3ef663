// TensorBoard event files (see tensorboard.h).
#include "report/tensorboard.h"

#include <unistd.h>

#include <array>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "base/error.h"
#include "base/file.h"

namespace bertfit::report {
namespace {

constexpr std::uint32_t kMaskDelta = 0xa282ead8u;

std::array<std::uint32_t, 256> crc_table() {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;  // reflected
    t[i] = c;
  }
  return t;
}

// Protobuf wire format: varints, tags, length-delimited and fixed fields.
void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}
void put_tag(std::string& out, int field, int wire) {
  put_varint(out, static_cast<std::uint64_t>(field) << 3 | static_cast<std::uint64_t>(wire));
}
void put_bytes(std::string& out, int field, std::string_view bytes) {
  put_tag(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}
template <typename T>
void put_fixed(std::string& out, T v) {
  static_assert(std::endian::native == std::endian::little);
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}

std::string event(double wall_time, std::int64_t step) {
  std::string e;
  put_tag(e, 1, 1);  // wall_time: double
  put_fixed(e, wall_time);
  put_tag(e, 2, 0);  // step: int64
  put_varint(e, static_cast<std::uint64_t>(step));
  return e;
}

// A reader of one protobuf message; throws on anything malformed.
class Wire {
 public:
  Wire(std::string_view data, const std::string& where) : data_(data), where_(where) {}
  bool done() const { return pos_ >= data_.size(); }
  std::uint64_t varint() {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= data_.size()) bad("a truncated varint");
      const auto byte = static_cast<unsigned char>(data_[pos_++]);
      v |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return v;
    }
    bad("a varint over 10 bytes");
  }
  std::string_view take(std::size_t n) {
    if (n > data_.size() - pos_) bad("a field past the end of its message");
    std::string_view s = data_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  template <typename T>
  T fixed() {
    T v;
    std::memcpy(&v, take(sizeof(T)).data(), sizeof(T));
    return v;
  }
  void skip(int wire) {
    switch (wire) {
      case 0:
        varint();
        return;
      case 1:
        take(8);
        return;
      case 2:
        take(varint());
        return;
      case 5:
        take(4);
        return;
      default:
        bad(cat("wire type ", wire));
    }
  }
  [[noreturn]] void bad(const std::string& what) const {
    throw_error(where_, ": malformed Event protobuf (", what, ")");
  }

 private:
  std::string_view data_;
  std::size_t pos_ = 0;
  const std::string& where_;
};

std::string host_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') return "localhost";
  return host;
}

}  // namespace

std::uint32_t crc32c(std::string_view data) {
  static const std::array<std::uint32_t, 256> table = crc_table();
  std::uint32_t c = 0xffffffffu;
  for (char ch : data) c = table[(c ^ static_cast<unsigned char>(ch)) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

std::uint32_t masked_crc32c(std::string_view data) {
  const std::uint32_t c = crc32c(data);
  return ((c >> 15) | (c << 17)) + kMaskDelta;
}

EventWriter::EventWriter(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw_error("cannot create the TensorBoard folder ", dir, ": ", ec.message());
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const double seconds = std::chrono::duration<double>(now).count();
  path_ = join_path(dir, cat("events.out.tfevents.", static_cast<long long>(seconds), ".",
                             host_name(), ".", ::getpid()));
  file_ = std::fopen(path_.c_str(), "wb");
  if (file_ == nullptr) throw_error("cannot write ", path_, ": ", std::strerror(errno));
  std::string first = event(seconds, 0);
  put_bytes(first, 3, "brain.Event:2");  // file_version
  write_record(first);
  flush();
}

EventWriter::~EventWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void EventWriter::scalar(const std::string& tag, std::int64_t step, double value,
                         double wall_time) {
  std::string v;
  put_bytes(v, 1, tag);  // Summary.Value.tag
  put_tag(v, 2, 5);      // Summary.Value.simple_value: float
  put_fixed(v, static_cast<float>(value));
  std::string summary;
  put_bytes(summary, 1, v);  // Summary.value
  std::string e = event(wall_time, step);
  put_bytes(e, 5, summary);  // Event.summary
  write_record(e);
}

void EventWriter::write_record(const std::string& data) {
  std::string header;
  put_fixed(header, static_cast<std::uint64_t>(data.size()));
  std::string record = header;
  put_fixed(record, masked_crc32c(header));
  record += data;
  put_fixed(record, masked_crc32c(data));
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size()) {
    throw_error("cannot write ", path_, ": ", std::strerror(errno));
  }
}

void EventWriter::flush() {
  if (std::fflush(file_) != 0) throw_error("cannot write ", path_, ": ", std::strerror(errno));
}

EventFile read_event_file(const std::string& path) {
  const std::string bytes = read_file(path);
  EventFile out;
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    const std::string where = cat(path, " at byte ", pos);
    if (bytes.size() - pos < 12) throw_error(where, ": a truncated record header");
    const std::string_view header(bytes.data() + pos, 8);
    std::uint64_t length;
    std::uint32_t crc;
    std::memcpy(&length, header.data(), 8);
    std::memcpy(&crc, bytes.data() + pos + 8, 4);
    if (crc != masked_crc32c(header)) throw_error(where, ": the length's CRC does not match");
    if (length > bytes.size() - pos - 16) throw_error(where, ": a truncated record");
    const std::string_view data(bytes.data() + pos + 12, length);
    std::memcpy(&crc, bytes.data() + pos + 12 + length, 4);
    if (crc != masked_crc32c(data)) throw_error(where, ": the record's CRC does not match");
    pos += 16 + length;

    Wire e(data, where);
    double wall_time = 0;
    std::int64_t step = 0;
    std::vector<ScalarEvent> values;
    while (!e.done()) {
      const std::uint64_t key = e.varint();
      const int field = static_cast<int>(key >> 3), wire = static_cast<int>(key & 7);
      if (field == 1 && wire == 1) {
        wall_time = e.fixed<double>();
      } else if (field == 2 && wire == 0) {
        step = static_cast<std::int64_t>(e.varint());
      } else if (field == 3 && wire == 2) {
        out.file_version = std::string(e.take(e.varint()));
      } else if (field == 5 && wire == 2) {
        Wire summary(e.take(e.varint()), where);
        while (!summary.done()) {
          const std::uint64_t skey = summary.varint();
          if (skey != (1u << 3 | 2u)) {
            summary.skip(static_cast<int>(skey & 7));
            continue;
          }
          Wire value(summary.take(summary.varint()), where);
          ScalarEvent s;
          bool simple = false;
          while (!value.done()) {
            const std::uint64_t vkey = value.varint();
            if (vkey == (1u << 3 | 2u)) {
              s.tag = std::string(value.take(value.varint()));
            } else if (vkey == (2u << 3 | 5u)) {
              s.value = value.fixed<float>();
              simple = true;
            } else {
              value.skip(static_cast<int>(vkey & 7));
            }
          }
          if (simple) values.push_back(std::move(s));
        }
      } else {
        e.skip(wire);
      }
    }
    for (ScalarEvent& s : values) {
      s.step = step;
      s.wall_time = wall_time;
      out.scalars.push_back(std::move(s));
    }
  }
  return out;
}

}  // namespace bertfit::report
