// Safetensors files (the Hugging Face tensor format): an 8-byte little-endian header length, a
// JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {str: str}}, then raw
// little-endian data. Reading maps the file and validates the whole header before any tensor is
// touched; writing is atomic (temporary name, fsync, rename). Knows formats, not models.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/shape.h"
#include "io/mapped_file.h"

namespace bertfit {

// Every element type the format defines that bertfit recognises.
enum class SafetensorsDType { kF32, kF16, kBF16, kF64, kI64, kI32, kI16, kI8, kU8, kBool };

const char* safetensors_dtype_name(SafetensorsDType t);  // "F32", "BF16", ...
std::size_t safetensors_dtype_size(SafetensorsDType t);  // bytes per element
bool is_floating(SafetensorsDType t);                    // F32, F16, BF16, F64

// Converts n little-endian elements of a floating dtype (F32, F16, BF16 or F64) at src (any
// alignment) to fp32: exact for F32, F16 and BF16, rounded to nearest for F64. Both checkpoint
// formats read through it. CHECKs is_floating(dtype): callers name the tensor in their Error.
void floating_to_f32(SafetensorsDType dtype, const std::byte* src, std::size_t n, float* out);

struct TensorInfo {
  std::string name;
  SafetensorsDType dtype;
  Shape shape;
  std::uint64_t begin = 0;  // byte offsets into the data section (after the header)
  std::uint64_t end = 0;
  std::uint64_t bytes() const { return end - begin; }
};

struct SafetensorsHeader {
  std::vector<TensorInfo> tensors;  // sorted by begin offset (file order)
  std::map<std::string, std::string> metadata;
  std::uint64_t data_start = 0;  // file offset of the data section: 8 + header length
};

// Parses and validates the header of a complete safetensors file held in file_bytes. Throws
// Error naming `source` (and the tensor, where one is at fault) for a truncated file, a header
// length beyond the file, invalid JSON, missing or ill-typed fields, an unknown dtype, a bad
// shape, offsets outside the data section, overlapping tensors, or a byte count that does not
// match shape x dtype.
SafetensorsHeader parse_safetensors_header(std::span<const std::byte> file_bytes,
                                           const std::string& source);

// A read-only, memory-mapped safetensors file.
class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  const TensorInfo* find(const std::string& name) const;  // nullptr if absent
  const std::vector<TensorInfo>& tensors() const { return header_.tensors; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }

  // Copies a floating-point tensor (F32, F16, BF16 or F64) into out[0 .. numel) as fp32.
  // Throws Error naming the file and tensor for an integer or boolean tensor.
  void read_f32(const TensorInfo& info, float* out) const;
  // The raw little-endian bytes of a tensor (not necessarily aligned).
  std::span<const std::byte> bytes(const TensorInfo& info) const;

 private:
  SafetensorsFile() = default;

  MappedFile file_;  // move-only, so SafetensorsFile is too
  SafetensorsHeader header_;
  std::unordered_map<std::string, std::size_t> index_;
};

// One tensor to write: `data` points at shape.numel() elements of dtype (any dtype above).
struct TensorToWrite {
  std::string name;
  SafetensorsDType dtype;
  Shape shape;
  const void* data;
};

// Writes tensors in the order given, the header padded with spaces to a multiple of 8 bytes.
// The default metadata {"format": "pt"} is what transformers requires to load the file.
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

}  // namespace bertfit
