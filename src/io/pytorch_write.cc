// torch.save's zip checkpoint of fp32 tensors (see pytorch_write.h): the pickle opcodes of
// protocol 2 written by hand, the entries stored uncompressed with their data 64-byte aligned
// through the local header's extra field, as PyTorch's own writer (miniz) aligns them.
#include "io/pytorch_write.h"

#include <array>
#include <cstdint>
#include <cstring>
#include <limits>

#include "base/check.h"
#include "base/file.h"

namespace bertfit {
namespace {

constexpr std::size_t kAlign = 64;
constexpr std::uint16_t kDosDate = (0 << 9) | (1 << 5) | 1;  // 1980-01-01

std::uint32_t crc32(std::string_view data) {
  static const std::array<std::uint32_t, 256> table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  std::uint32_t c = 0xFFFFFFFFu;
  for (unsigned char ch : data) c = table[(c ^ ch) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

void put16(std::string& out, std::uint16_t v) {
  out.push_back(static_cast<char>(v & 0xFF));
  out.push_back(static_cast<char>(v >> 8));
}

void put32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

// Pickle protocol 2 opcodes.
struct Pickle {
  std::string out;
  void op(char c) { out.push_back(c); }
  void global(const char* module, const char* name) {
    op('c');
    out += std::string(module) + "\n" + name + "\n";
  }
  void text(const std::string& s) {  // BINUNICODE
    op('X');
    put32(out, static_cast<std::uint32_t>(s.size()));
    out += s;
  }
  void integer(std::int64_t v) {  // BININT (4 bytes, signed)
    CHECK(v >= std::numeric_limits<std::int32_t>::min() &&
              v <= std::numeric_limits<std::int32_t>::max(),
          "pickled integer ", v);
    op('J');
    put32(out, static_cast<std::uint32_t>(static_cast<std::int32_t>(v)));
  }
  void ints(const std::vector<std::int64_t>& values) {  // a tuple of ints
    op('(');
    for (std::int64_t v : values) integer(v);
    op('t');
  }
  void ordered_dict() {
    global("collections", "OrderedDict");
    op(')');
    op('R');
  }
};

struct Entry {
  std::string name;
  std::string data;
};

std::string zip_of(const std::vector<Entry>& entries) {
  std::string out, central;
  for (const Entry& e : entries) {
    CHECK(e.data.size() < 0xFFFFFFFFu && out.size() < 0xFFFFFFFFu, "zip entry ", e.name,
          " needs zip64");
    const std::uint32_t crc = crc32(e.data);
    const std::uint32_t size = static_cast<std::uint32_t>(e.data.size());
    const std::size_t offset = out.size();
    // Pad the extra field so that the data starts on a kAlign boundary (an extra field of id
    // "FB" and zeros, as PyTorch's writer pads it).
    const std::size_t header = offset + 30 + e.name.size() + 4;
    const std::size_t pad = (kAlign - header % kAlign) % kAlign;
    put32(out, 0x04034b50);
    put16(out, 20);  // version needed
    put16(out, 0);   // flags
    put16(out, 0);   // stored
    put16(out, 0);   // time
    put16(out, kDosDate);
    put32(out, crc);
    put32(out, size);
    put32(out, size);
    put16(out, static_cast<std::uint16_t>(e.name.size()));
    put16(out, static_cast<std::uint16_t>(4 + pad));
    out += e.name;
    put16(out, 0x4246);  // "FB"
    put16(out, static_cast<std::uint16_t>(pad));
    out.append(pad, '\0');
    out += e.data;

    put32(central, 0x02014b50);
    put16(central, 20);  // version made by
    put16(central, 20);  // version needed
    put16(central, 0);
    put16(central, 0);
    put16(central, 0);
    put16(central, kDosDate);
    put32(central, crc);
    put32(central, size);
    put32(central, size);
    put16(central, static_cast<std::uint16_t>(e.name.size()));
    put16(central, 0);  // extra
    put16(central, 0);  // comment
    put16(central, 0);  // disk
    put16(central, 0);  // internal attributes
    put32(central, 0);  // external attributes
    put32(central, static_cast<std::uint32_t>(offset));
    central += e.name;
  }
  const std::size_t cd_offset = out.size();
  out += central;
  put32(out, 0x06054b50);
  put16(out, 0);
  put16(out, 0);
  put16(out, static_cast<std::uint16_t>(entries.size()));
  put16(out, static_cast<std::uint16_t>(entries.size()));
  put32(out, static_cast<std::uint32_t>(central.size()));
  put32(out, static_cast<std::uint32_t>(cd_offset));
  put16(out, 0);  // comment
  return out;
}

}  // namespace

std::string pytorch_state_dict_bytes(const std::vector<TensorToWrite>& tensors) {
  Pickle p;
  p.op('\x80');
  p.op('\x02');
  p.ordered_dict();
  p.op('(');  // MARK for SETITEMS
  std::vector<Entry> entries;
  entries.push_back({"archive/data.pkl", ""});
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const TensorToWrite& t = tensors[i];
    CHECK(t.dtype == SafetensorsDType::kF32, "tensor ", t.name, " is not F32");
    const std::int64_t n = t.shape.numel();
    std::vector<std::int64_t> size, stride(t.shape.rank());
    for (std::size_t d = 0; d < t.shape.rank(); ++d) size.push_back(t.shape.dims[d]);
    std::int64_t step = 1;
    for (std::size_t d = t.shape.rank(); d-- > 0;) {
      stride[d] = step;
      step *= t.shape.dims[d];
    }
    p.text(t.name);
    p.global("torch._utils", "_rebuild_tensor_v2");
    p.op('(');
    p.op('(');  // the storage's persistent id
    p.text("storage");
    p.global("torch", "FloatStorage");
    p.text(std::to_string(i));
    p.text("cpu");
    p.integer(n);
    p.op('t');
    p.op('Q');     // BINPERSID
    p.integer(0);  // storage offset
    p.ints(size);
    p.ints(stride);
    p.op('\x89');      // requires_grad False
    p.ordered_dict();  // backward hooks
    p.op('t');
    p.op('R');
    entries.push_back({"archive/data/" + std::to_string(i),
                       std::string(static_cast<const char*>(t.data), n * sizeof(float))});
  }
  p.op('u');  // SETITEMS
  p.op('.');  // STOP
  entries[0].data = std::move(p.out);
  entries.push_back({"archive/version", "3\n"});
  return zip_of(entries);
}

void write_pytorch_state_dict(const std::string& path, const std::vector<TensorToWrite>& tensors) {
  write_file_atomic(path, pytorch_state_dict_bytes(tensors));
}

}  // namespace bertfit
