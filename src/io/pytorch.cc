// PyTorch checkpoints: the archive's layout (prefix, byteorder, storage records), the views
// that make tensors of storages, and the mapped file.
#include "io/pytorch.h"

#include <cstring>
#include <unordered_map>

#include "base/error.h"
#include "io/pickle.h"
#include "io/zip.h"

namespace bertfit {
namespace {

// What the legacy format (torch.save before 1.6, or _use_new_zipfile_serialization=False)
// begins with: a protocol-2 pickle of torch.serialization.MAGIC_NUMBER, 0x1950a86a20f9469cfc6c.
constexpr unsigned char kLegacyMagic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c,
                                          0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

[[noreturn]] void refuse_non_zip(std::span<const std::byte> file, const std::string& source) {
  if (file.size() >= sizeof(kLegacyMagic) &&
      std::memcmp(file.data(), kLegacyMagic, sizeof(kLegacyMagic)) == 0) {
    throw_error(source,
                ": is in PyTorch's legacy serialization format (before PyTorch 1.6, or "
                "saved with _use_new_zipfile_serialization=False), which bertfit does "
                "not read. Re-save it once with a recent PyTorch: torch.save(torch.load("
                "path, weights_only=True), path), or save_pretrained the model");
  }
  if (!file.empty() && static_cast<std::uint8_t>(file[0]) == 0x80) {
    throw_error(source,
                ": is a bare pickle, not a torch.save zip archive; bertfit reads state "
                "dicts saved with torch.save (PyTorch 1.6 or later)");
  }
  throw_error(source,
              ": not a PyTorch checkpoint (torch.save writes a zip archive; this file "
              "does not begin with a zip signature)");
}

// The archive's record folder: every torch.save archive holds <prefix>/data.pkl.
std::string archive_prefix(const std::vector<ZipEntry>& entries, const std::string& source) {
  std::string prefix;
  for (const ZipEntry& e : entries) {
    const std::size_t slash = e.name.find('/');
    if (slash == 0 || slash == std::string::npos || e.name.substr(slash) != "/data.pkl") continue;
    if (!prefix.empty()) {
      throw_error(source, ": holds two pickles (", prefix, "/data.pkl and ", e.name,
                  "); not a single torch.save checkpoint");
    }
    prefix = e.name.substr(0, slash);
  }
  if (prefix.empty()) {
    throw_error(source, ": a zip archive without <name>/data.pkl; not a torch.save checkpoint");
  }
  return prefix;
}

// The bytes tensor `t` views in its storage's record, after checking that the view is
// contiguous and lies inside the storage.
CheckpointTensor make_tensor(const PickledTensor& t, const PickledStorage& storage,
                             std::span<const std::byte> record, const std::string& source) {
  const std::string where = cat(source, ": tensor '", t.name, "'");
  CheckpointTensor out{t.name, storage.dtype, Shape(t.size), {}, source};
  // The product of the non-zero dims must fit in int64 so that Shape::numel never overflows.
  unsigned __int128 product = 1;
  bool empty = false;
  for (std::int64_t d : t.size) {
    empty = empty || d == 0;
    if (d != 0) product *= static_cast<std::uint64_t>(d);
    if (product > static_cast<unsigned __int128>(INT64_MAX)) {
      throw_error(where, ": size ", out.shape.str(), " is too large");
    }
  }
  if (empty) return out;  // no bytes to view, whatever the offset and strides
  // Contiguous (row-major): each stride is the product of the later sizes; a dimension of size
  // 1 is never stepped over, so its stride does not matter (torch gives such dims any stride).
  std::int64_t expected = 1;
  for (std::size_t d = t.size.size(); d-- > 0;) {
    if (t.size[d] != 1 && t.stride[d] != expected) {
      Shape stride(t.stride);
      throw_error(where, ": is a non-contiguous view (size ", out.shape.str(), ", stride ",
                  stride.str(),
                  ") of its storage; bertfit reads contiguous tensors only. "
                  "Re-save the state dict with each tensor made contiguous (tensor.contiguous())");
    }
    expected *= t.size[d];
  }
  const std::uint64_t numel = static_cast<std::uint64_t>(product);
  if (t.offset > storage.numel || numel > storage.numel - t.offset) {
    throw_error(where, ": its ", numel, " elements from storage offset ", t.offset,
                " run past its storage '", storage.key, "' of ", storage.numel, " elements");
  }
  const std::size_t element = safetensors_dtype_size(storage.dtype);
  out.bytes = record.subspan(t.offset * element, numel * element);
  return out;
}

}  // namespace

std::vector<CheckpointTensor> parse_pytorch_checkpoint(std::span<const std::byte> file,
                                                       const std::string& source) {
  if (!looks_like_zip(file)) refuse_non_zip(file, source);
  const std::vector<ZipEntry> entries = read_zip(file, source);
  const std::string prefix = archive_prefix(entries, source);
  std::unordered_map<std::string, std::span<const std::byte>> records;
  for (const ZipEntry& e : entries) {
    if (e.name.compare(0, prefix.size() + 1, prefix + "/") == 0) {
      records[e.name.substr(prefix.size() + 1)] = e.data;
    }
  }
  if (records.count("constants.pkl")) {
    throw_error(source, ": is a TorchScript archive (torch.jit.save), not a state dict saved ",
                "with torch.save");
  }
  // PyTorch 2.1 and later record the byte order; earlier files are little-endian (x86, ARM).
  if (auto it = records.find("byteorder"); it != records.end()) {
    std::string order(reinterpret_cast<const char*>(it->second.data()), it->second.size());
    if (order == "big") {
      throw_error(source,
                  ": holds big-endian data (saved on a big-endian machine); bertfit reads "
                  "little-endian checkpoints only. Re-save it on a little-endian machine");
    }
    if (order != "little") {
      throw_error(source, ": unknown byteorder record '", order.substr(0, 16), "'");
    }
  }
  const PickledStateDict dict = unpickle_state_dict(records.at("data.pkl"), source);

  std::vector<std::span<const std::byte>> storage_bytes;
  for (const PickledStorage& s : dict.storages) {
    auto it = records.find("data/" + s.key);
    if (it == records.end()) {
      throw_error(source, ": storage '", s.key, "' has no record ", prefix, "/data/", s.key,
                  " in the archive (truncated or corrupt checkpoint)");
    }
    const std::size_t element = safetensors_dtype_size(s.dtype);
    if (s.numel > it->second.size() / element || s.numel * element != it->second.size()) {
      throw_error(source, ": storage '", s.key, "' should hold ", s.numel, " elements of ",
                  safetensors_dtype_name(s.dtype), " but its record has ", it->second.size(),
                  " bytes");
    }
    storage_bytes.push_back(it->second);
  }
  std::vector<CheckpointTensor> tensors;
  tensors.reserve(dict.tensors.size());
  for (const PickledTensor& t : dict.tensors) {
    tensors.push_back(make_tensor(t, dict.storages[t.storage], storage_bytes[t.storage], source));
  }
  return tensors;
}

PytorchFile PytorchFile::open(const std::string& path) {
  PytorchFile file;
  file.file_ = MappedFile::open(path);
  file.tensors_ = parse_pytorch_checkpoint(file.file_.bytes(), path);
  return file;
}

}  // namespace bertfit
