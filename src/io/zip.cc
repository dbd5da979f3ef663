// Zip reading: the end-of-central-directory record (and its zip64 form), the central directory
// (and zip64 extra fields), each local header; every offset and size checked against the file.
#include "io/zip.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>

#include "base/error.h"

namespace bertfit {
namespace {

constexpr std::uint32_t kLocalSig = 0x04034b50;
constexpr std::uint32_t kCentralSig = 0x02014b50;
constexpr std::uint32_t kEndSig = 0x06054b50;
constexpr std::uint32_t kZip64EndSig = 0x06064b50;
constexpr std::uint32_t kZip64LocatorSig = 0x07064b50;
constexpr std::size_t kEndSize = 22;                 // end of central directory, without comment
constexpr std::size_t kZip64LocatorSize = 20;        // zip64 end of central directory locator
constexpr std::size_t kZip64EndSize = 56;            // zip64 end record, without extensible data
constexpr std::size_t kCentralSize = 46;             // central directory header, without names
constexpr std::size_t kLocalSize = 30;               // local file header, without names
constexpr std::uint32_t kSaturated32 = 0xffffffffu;  // "see the zip64 field"
constexpr std::uint16_t kSaturated16 = 0xffffu;

// A little-endian unsigned integer of n bytes at `at`; the caller has checked the bounds.
std::uint64_t le(std::span<const std::byte> b, std::size_t at, int n) {
  std::uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<std::uint8_t>(b[at + i]);
  return v;
}

// True if [at, at + n) lies inside a buffer of `size` bytes (no overflow).
bool fits(std::uint64_t at, std::uint64_t n, std::uint64_t size) {
  return at <= size && n <= size - at;
}

struct Directory {
  std::uint64_t entries = 0;
  std::uint64_t offset = 0;  // of the central directory
  std::uint64_t size = 0;
};

// The last end-of-central-directory record (the comment after it may hold anything).
std::size_t find_end_record(std::span<const std::byte> file, const std::string& source) {
  if (file.size() >= kEndSize) {
    const std::size_t last = file.size() - kEndSize;
    const std::size_t first = last > 0xffff ? last - 0xffff : 0;  // a comment is < 64 KiB
    for (std::size_t pos = last + 1; pos-- > first;) {
      if (le(file, pos, 4) == kEndSig && le(file, pos + 20, 2) <= file.size() - pos - kEndSize) {
        return pos;
      }
    }
  }
  throw_error(source, ": not a complete zip archive (no end-of-central-directory record; ",
              "truncated file?)");
}

Directory read_end_records(std::span<const std::byte> file, const std::string& source) {
  const std::size_t end = find_end_record(file, source);
  if (le(file, end + 4, 2) != 0 || le(file, end + 6, 2) != 0) {
    throw_error(source, ": multi-disk zip archives are not supported");
  }
  Directory dir{le(file, end + 10, 2), le(file, end + 16, 4), le(file, end + 12, 4)};
  // PyTorch always writes the zip64 records; when present they are authoritative.
  if (end >= kZip64LocatorSize && le(file, end - kZip64LocatorSize, 4) == kZip64LocatorSig) {
    const std::size_t loc = end - kZip64LocatorSize;
    const std::uint64_t at = le(file, loc + 8, 8);
    if (le(file, loc + 4, 4) != 0 || le(file, loc + 16, 4) > 1) {
      throw_error(source, ": multi-disk zip archives are not supported");
    }
    if (!fits(at, kZip64EndSize, loc) || le(file, at, 4) != kZip64EndSig) {
      throw_error(source, ": the zip64 end-of-central-directory record at byte ", at,
                  " is missing or outside the file (truncated or corrupt archive)");
    }
    if (le(file, at + 16, 4) != 0 || le(file, at + 20, 4) != 0) {
      throw_error(source, ": multi-disk zip archives are not supported");
    }
    dir = {le(file, at + 32, 8), le(file, at + 48, 8), le(file, at + 40, 8)};
  } else if (dir.entries == kSaturated16 || dir.offset == kSaturated32 ||
             dir.size == kSaturated32) {
    throw_error(source, ": zip64 archive without its zip64 end-of-central-directory locator");
  }
  if (!fits(dir.offset, dir.size, end)) {
    throw_error(source, ": the central directory (bytes ", dir.offset, " + ", dir.size,
                ") lies outside the archive (truncated or corrupt file)");
  }
  return dir;
}

struct CentralEntry {
  std::string name;
  std::uint64_t size = 0;    // uncompressed = compressed, for stored entries
  std::uint64_t offset = 0;  // of the local header
};

// Replaces the saturated 32-bit fields by the zip64 extended information extra field (0x0001),
// which lists, in this order, only the fields that are saturated.
void apply_zip64_extra(std::span<const std::byte> extra, std::uint64_t& uncompressed,
                       std::uint64_t& compressed, std::uint64_t& offset, const std::string& where) {
  std::size_t pos = 0;
  while (pos + 4 <= extra.size()) {
    const std::uint64_t id = le(extra, pos, 2);
    const std::uint64_t n = le(extra, pos + 2, 2);
    if (!fits(pos + 4, n, extra.size())) break;
    if (id == 0x0001) {
      std::size_t at = pos + 4;
      for (std::uint64_t* field : {&uncompressed, &compressed, &offset}) {
        if (*field != kSaturated32) continue;
        if (!fits(at, 8, pos + 4 + n)) {
          throw_error(where, ": zip64 extra field too short for its saturated sizes");
        }
        *field = le(extra, at, 8);
        at += 8;
      }
      return;
    }
    pos += 4 + n;
  }
  if (uncompressed == kSaturated32 || compressed == kSaturated32 || offset == kSaturated32) {
    throw_error(where, ": saturated zip sizes without a zip64 extra field");
  }
}

CentralEntry read_central_entry(std::span<const std::byte> cd, std::size_t& pos,
                                const std::string& source) {
  if (!fits(pos, kCentralSize, cd.size()) || le(cd, pos, 4) != kCentralSig) {
    throw_error(source, ": corrupt zip central directory at its byte ", pos);
  }
  const std::uint64_t flags = le(cd, pos + 8, 2);
  const std::uint64_t method = le(cd, pos + 10, 2);
  std::uint64_t compressed = le(cd, pos + 20, 4);
  std::uint64_t uncompressed = le(cd, pos + 24, 4);
  const std::size_t name_len = le(cd, pos + 28, 2);
  const std::size_t extra_len = le(cd, pos + 30, 2);
  const std::size_t comment_len = le(cd, pos + 32, 2);
  const std::uint64_t disk = le(cd, pos + 34, 2);
  CentralEntry e;
  e.offset = le(cd, pos + 42, 4);
  if (!fits(pos + kCentralSize, name_len + extra_len + comment_len, cd.size())) {
    throw_error(source, ": corrupt zip central directory (an entry runs past its end)");
  }
  e.name.assign(reinterpret_cast<const char*>(cd.data() + pos + kCentralSize), name_len);
  const std::string where = cat(source, ": zip entry '", e.name, "'");
  apply_zip64_extra(cd.subspan(pos + kCentralSize + name_len, extra_len), uncompressed, compressed,
                    e.offset, where);
  pos += kCentralSize + name_len + extra_len + comment_len;
  if (disk != 0 && disk != kSaturated16) throw_error(where, ": is on another disk");
  if (flags & 0x41) throw_error(where, ": is encrypted");
  if (method != 0) {
    throw_error(where, ": is compressed (method ", method,
                "); PyTorch stores checkpoint entries uncompressed and bertfit reads only those");
  }
  if (compressed != uncompressed) {
    throw_error(where, ": stored entry with compressed size ", compressed, " != uncompressed size ",
                uncompressed);
  }
  e.size = uncompressed;
  return e;
}

// The entry's data, found through its local header (whose sizes may be zero: data descriptor).
std::span<const std::byte> locate_data(std::span<const std::byte> file, const CentralEntry& e,
                                       const std::string& source) {
  const std::string where = cat(source, ": zip entry '", e.name, "'");
  if (!fits(e.offset, kLocalSize, file.size()) || le(file, e.offset, 4) != kLocalSig) {
    throw_error(where, ": no local header at byte ", e.offset, " (truncated or corrupt file)");
  }
  const std::uint64_t name_len = le(file, e.offset + 26, 2);
  const std::uint64_t extra_len = le(file, e.offset + 28, 2);
  const std::uint64_t start = e.offset + kLocalSize + name_len + extra_len;
  if (name_len != e.name.size() || !fits(e.offset + kLocalSize, name_len, file.size()) ||
      std::memcmp(file.data() + e.offset + kLocalSize, e.name.data(), name_len) != 0) {
    throw_error(where, ": its local header names another entry (corrupt archive)");
  }
  if (!fits(start, e.size, file.size())) {
    throw_error(where, ": its ", e.size, " bytes at byte ", start,
                " run past the end of the file (truncated file?)");
  }
  return file.subspan(start, e.size);
}

}  // namespace

bool looks_like_zip(std::span<const std::byte> file) {
  return file.size() >= 4 && le(file, 0, 4) == kLocalSig;
}

std::vector<ZipEntry> read_zip(std::span<const std::byte> file, const std::string& source) {
  const Directory dir = read_end_records(file, source);
  std::span<const std::byte> cd = file.subspan(dir.offset, dir.size);
  std::vector<ZipEntry> entries;
  entries.reserve(std::min<std::uint64_t>(dir.entries, dir.size / kCentralSize));
  std::set<std::string> names;
  std::size_t pos = 0;
  for (std::uint64_t i = 0; i < dir.entries; ++i) {
    CentralEntry e = read_central_entry(cd, pos, source);
    if (!names.insert(e.name).second) {
      throw_error(source, ": zip entry '", e.name, "' appears twice");
    }
    std::span<const std::byte> data = locate_data(file, e, source);
    entries.push_back({std::move(e.name), data});
  }
  return entries;
}

}  // namespace bertfit
