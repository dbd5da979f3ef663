// Safetensors reading (mmap, conversion to fp32) and atomic writing.
#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/check.h"
#include "base/dtype.h"
#include "base/error.h"
#include "base/file.h"

namespace bertfit {

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile file;
  file.path_ = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_error(path, ": cannot open (", std::strerror(errno), ")");
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw_error(path, ": not a regular file");
  }
  file.size_ = static_cast<std::size_t>(st.st_size);
  if (file.size_ > 0) {
    void* p = ::mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      throw_error(path, ": cannot map (", std::strerror(err), ")");
    }
    file.map_ = static_cast<const std::byte*>(p);
  }
  ::close(fd);
  // On an Error below, `file` is destroyed and unmaps.
  file.header_ = parse_safetensors_header({file.map_, file.size_}, path);
  for (std::size_t i = 0; i < file.header_.tensors.size(); ++i) {
    file.index_[file.header_.tensors[i].name] = i;
  }
  return file;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept { *this = std::move(other); }

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    map_ = other.map_;
    size_ = other.size_;
    header_ = std::move(other.header_);
    index_ = std::move(other.index_);
    other.map_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() { release(); }

void SafetensorsFile::release() {
  if (map_ != nullptr) ::munmap(const_cast<std::byte*>(map_), size_);
  map_ = nullptr;
  size_ = 0;
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &header_.tensors[it->second];
}

std::span<const std::byte> SafetensorsFile::bytes(const TensorInfo& info) const {
  CHECK(info.begin <= info.end && header_.data_start + info.end <= size_, "tensor ", info.name,
        " is not from ", path_);
  return {map_ + header_.data_start + info.begin, static_cast<std::size_t>(info.bytes())};
}

void SafetensorsFile::read_f32(const TensorInfo& info, float* out) const {
  auto src = bytes(info);
  const std::size_t n = static_cast<std::size_t>(info.shape.numel());
  switch (info.dtype) {
    case SafetensorsDType::kF32:
      if (n > 0) std::memcpy(out, src.data(), n * sizeof(float));
      return;
    case SafetensorsDType::kF16:
    case SafetensorsDType::kBF16: {
      const bool bf16 = info.dtype == SafetensorsDType::kBF16;
      for (std::size_t i = 0; i < n; ++i) {
        std::uint16_t h;
        std::memcpy(&h, src.data() + 2 * i, 2);
        out[i] = bf16 ? bf16_to_f32(h) : f16_to_f32(h);
      }
      return;
    }
    case SafetensorsDType::kF64:
      for (std::size_t i = 0; i < n; ++i) {
        double d;
        std::memcpy(&d, src.data() + 8 * i, 8);
        out[i] = static_cast<float>(d);
      }
      return;
    default:
      throw_error(path_, ": tensor '", info.name, "' has dtype ",
                  safetensors_dtype_name(info.dtype),
                  "; expected a floating-point tensor (F32, F16, BF16 or F64)");
  }
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
