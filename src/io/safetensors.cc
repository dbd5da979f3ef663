// Safetensors reading (mapped file, conversion to fp32) and atomic writing.
#include "io/safetensors.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "base/check.h"
#include "base/dtype.h"
#include "base/error.h"
#include "base/file.h"

namespace bertfit {

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile file;
  file.file_ = MappedFile::open(path);
  // On an Error below, `file` is destroyed and unmaps.
  file.header_ = parse_safetensors_header(file.file_.bytes(), path);
  for (std::size_t i = 0; i < file.header_.tensors.size(); ++i) {
    file.index_[file.header_.tensors[i].name] = i;
  }
  return file;
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &header_.tensors[it->second];
}

std::span<const std::byte> SafetensorsFile::bytes(const TensorInfo& info) const {
  auto all = file_.bytes();
  CHECK(info.begin <= info.end && header_.data_start + info.end <= all.size(), "tensor ", info.name,
        " is not from ", path());
  return all.subspan(header_.data_start + info.begin, static_cast<std::size_t>(info.bytes()));
}

void floating_to_f32(SafetensorsDType dtype, const std::byte* src, std::size_t n, float* out) {
  switch (dtype) {
    case SafetensorsDType::kF32:
      if (n > 0) std::memcpy(out, src, n * sizeof(float));
      return;
    case SafetensorsDType::kF16:
    case SafetensorsDType::kBF16: {
      const bool bf16 = dtype == SafetensorsDType::kBF16;
      for (std::size_t i = 0; i < n; ++i) {
        std::uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        out[i] = bf16 ? bf16_to_f32(h) : f16_to_f32(h);
      }
      return;
    }
    case SafetensorsDType::kF64:
      for (std::size_t i = 0; i < n; ++i) {
        double d;
        std::memcpy(&d, src + 8 * i, 8);
        out[i] = static_cast<float>(d);
      }
      return;
    default:
      CHECK(false, "dtype ", safetensors_dtype_name(dtype), " is not floating");
  }
}

void SafetensorsFile::read_f32(const TensorInfo& info, float* out) const {
  if (!is_floating(info.dtype)) {
    throw_error(path(), ": tensor '", info.name, "' has dtype ", safetensors_dtype_name(info.dtype),
                "; expected a floating-point tensor (F32, F16, BF16 or F64)");
  }
  floating_to_f32(info.dtype, bytes(info).data(), static_cast<std::size_t>(info.shape.numel()),
                  out);
}

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  std::vector<std::uint64_t> sizes;
  for (const auto& t : tensors) {
    if (t.name == "__metadata__" || header.contains(t.name)) {
      throw_error(path, ": cannot write tensor '", t.name, "': duplicate or reserved name");
    }
    for (auto d : t.shape.dims) CHECK(d >= 0, "tensor ", t.name, " shape ", t.shape.str());
    std::uint64_t bytes =
        static_cast<std::uint64_t>(t.shape.numel()) * safetensors_dtype_size(t.dtype);
    CHECK(bytes == 0 || t.data != nullptr, "tensor ", t.name, " has no data");
    header[t.name] = {{"dtype", safetensors_dtype_name(t.dtype)},
                      {"shape", t.shape.dims},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    sizes.push_back(bytes);
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    throw_error(path, ": cannot encode the safetensors header (", e.what(), ")");
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  const std::uint64_t header_len = text.size();

  AtomicFile file(path);
  file.write(&header_len, 8);
  file.write(text);
  for (std::size_t i = 0; i < tensors.size(); ++i) file.write(tensors[i].data, sizes[i]);
  file.commit();
}

}  // namespace bertfit
