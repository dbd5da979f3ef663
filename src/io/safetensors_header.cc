// The safetensors header parser and the dtype table: validates every field of every entry so
// that the reader can trust offsets and sizes afterwards. Pure (no I/O), so the fuzzer calls it.
#include <algorithm>
#include <bit>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>

#include "base/error.h"
#include "io/safetensors.h"

namespace bertfit {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

using nlohmann::json;

struct DTypeSpec {
  SafetensorsDType type;
  const char* name;
  std::size_t size;
};
constexpr DTypeSpec kDTypes[] = {
    {SafetensorsDType::kF32, "F32", 4},   {SafetensorsDType::kF16, "F16", 2},
    {SafetensorsDType::kBF16, "BF16", 2}, {SafetensorsDType::kF64, "F64", 8},
    {SafetensorsDType::kI64, "I64", 8},   {SafetensorsDType::kI32, "I32", 4},
    {SafetensorsDType::kI16, "I16", 2},   {SafetensorsDType::kI8, "I8", 1},
    {SafetensorsDType::kU8, "U8", 1},     {SafetensorsDType::kBool, "BOOL", 1},
};

const DTypeSpec& spec(SafetensorsDType t) {
  for (const auto& s : kDTypes) {
    if (s.type == t) return s;
  }
  return kDTypes[0];  // unreachable: every enumerator is in the table
}

// A non-negative JSON integer, or an Error naming the field.
std::uint64_t read_uint(const json& v, const std::string& where, const std::string& field) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (v.is_number_integer()) throw_error(where, ": ", field, " has a negative value ", v.dump());
  throw_error(where, ": ", field, " must hold non-negative integers, found ", v.dump());
}

// Parses the header text with nesting limited to what the format needs (an object of objects
// holding arrays of numbers) and duplicate top-level names rejected.
json parse_json(std::string_view text, const std::string& source) {
  std::set<std::string> names;
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) {
    bool opens =
        event == json::parse_event_t::object_start || event == json::parse_event_t::array_start;
    if (opens && depth >= 3) {
      throw_error(source, ": safetensors header nests deeper than the format allows");
    }
    if (event == json::parse_event_t::key && depth == 1) {
      const auto& name = parsed.get_ref<const std::string&>();
      if (!names.insert(name).second) {
        throw_error(source, ": tensor '", name, "' appears twice in the safetensors header");
      }
    }
    return true;
  };
  try {
    return json::parse(text, callback);
  } catch (const json::exception& e) {
    throw_error(source, ": safetensors header is not valid JSON (", e.what(), ")");
  }
}

TensorInfo parse_entry(const std::string& name, const json& entry, std::uint64_t data_size,
                       const std::string& source) {
  const std::string where = cat(source, ": tensor '", name, "'");
  if (!entry.is_object()) throw_error(where, ": header entry must be an object");
  TensorInfo info;
  info.name = name;

  auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end()) throw_error(where, ": missing \"dtype\"");
  if (!dtype_it->is_string()) throw_error(where, ": \"dtype\" must be a string");
  const auto& dtype = dtype_it->get_ref<const std::string&>();
  const DTypeSpec* found = nullptr;
  for (const auto& s : kDTypes) {
    if (dtype == s.name) found = &s;
  }
  if (found == nullptr) {
    throw_error(where, ": unknown or unsupported dtype '", dtype,
                "' (known: F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL)");
  }
  info.dtype = found->type;

  auto shape_it = entry.find("shape");
  if (shape_it == entry.end()) throw_error(where, ": missing \"shape\"");
  if (!shape_it->is_array()) throw_error(where, ": \"shape\" must be an array");
  // The product of the non-zero dims must fit in int64 so that Shape::numel never overflows.
  unsigned __int128 nonzero_product = 1;
  bool has_zero = false;
  for (const auto& d : *shape_it) {
    std::uint64_t dim = read_uint(d, where, "\"shape\"");
    if (dim == 0) {
      has_zero = true;
    } else {
      nonzero_product *= dim;
      if (nonzero_product > static_cast<unsigned __int128>(INT64_MAX)) {
        throw_error(where, ": shape ", shape_it->dump(), " is too large");
      }
    }
    info.shape.dims.push_back(static_cast<std::int64_t>(dim));
  }
  unsigned __int128 numel = has_zero ? 0 : nonzero_product;

  auto offsets_it = entry.find("data_offsets");
  if (offsets_it == entry.end()) throw_error(where, ": missing \"data_offsets\"");
  if (!offsets_it->is_array() || offsets_it->size() != 2) {
    throw_error(where, ": \"data_offsets\" must be an array [begin, end]");
  }
  info.begin = read_uint((*offsets_it)[0], where, "\"data_offsets\"");
  info.end = read_uint((*offsets_it)[1], where, "\"data_offsets\"");
  if (info.begin > info.end) {
    throw_error(where, ": data_offsets [", info.begin, ", ", info.end, "] begin after end");
  }
  if (info.end > data_size) {
    throw_error(where, ": data_offsets [", info.begin, ", ", info.end,
                "] run past the data section of ", data_size, " bytes (truncated file?)");
  }
  if (numel * found->size != info.bytes()) {
    throw_error(where, ": shape ", info.shape.str(), " of ", dtype, " needs ",
                static_cast<std::uint64_t>(numel * found->size), " bytes but data_offsets [",
                info.begin, ", ", info.end, "] hold ", info.bytes());
  }
  return info;
}

std::map<std::string, std::string> parse_metadata(const json& m, const std::string& source) {
  if (!m.is_object()) throw_error(source, ": \"__metadata__\" must be an object");
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : m.items()) {
    if (!value.is_string()) {
      throw_error(source, ": \"__metadata__\" value for '", key, "' must be a string");
    }
    out[key] = value.get<std::string>();
  }
  return out;
}

}  // namespace

const char* safetensors_dtype_name(SafetensorsDType t) { return spec(t).name; }
std::size_t safetensors_dtype_size(SafetensorsDType t) { return spec(t).size; }
bool is_floating(SafetensorsDType t) {
  return t == SafetensorsDType::kF32 || t == SafetensorsDType::kF16 ||
         t == SafetensorsDType::kBF16 || t == SafetensorsDType::kF64;
}

SafetensorsHeader parse_safetensors_header(std::span<const std::byte> file_bytes,
                                           const std::string& source) {
  if (file_bytes.size() < 8) {
    throw_error(source, ": not a safetensors file (", file_bytes.size(),
                " bytes, shorter than the 8-byte header length)");
  }
  std::uint64_t header_len;
  std::memcpy(&header_len, file_bytes.data(), 8);
  const std::uint64_t after = file_bytes.size() - 8;
  if (header_len > after) {
    throw_error(source, ": safetensors header length ", header_len, " runs past the end of the ",
                file_bytes.size(), "-byte file (truncated, or not a safetensors file)");
  }
  std::string_view text(reinterpret_cast<const char*>(file_bytes.data()) + 8, header_len);
  json header = parse_json(text, source);
  if (!header.is_object()) throw_error(source, ": safetensors header is not a JSON object");

  SafetensorsHeader out;
  out.data_start = 8 + header_len;
  const std::uint64_t data_size = after - header_len;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      out.metadata = parse_metadata(value, source);
    } else {
      out.tensors.push_back(parse_entry(key, value, data_size, source));
    }
  }
  std::sort(out.tensors.begin(), out.tensors.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  const TensorInfo* previous = nullptr;  // the last non-empty tensor
  for (const auto& t : out.tensors) {
    if (t.bytes() == 0) continue;
    if (previous != nullptr && previous->end > t.begin) {
      throw_error(source, ": tensor '", t.name, "' (bytes [", t.begin, ", ", t.end,
                  ")) overlaps tensor '", previous->name, "' (bytes [", previous->begin, ", ",
                  previous->end, "))");
    }
    previous = &t;
  }
  return out;
}

}  // namespace bertfit
