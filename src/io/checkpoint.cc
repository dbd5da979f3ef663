// Checkpoints of either format, single or sharded; reading a tensor as fp32.
#include "io/checkpoint.h"

#include <map>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file.h"
#include "io/json.h"

namespace bertfit {
namespace {

std::vector<CheckpointTensor> tensors_of(const SafetensorsFile& file) {
  std::vector<CheckpointTensor> out;
  for (const TensorInfo& t : file.tensors()) {
    out.push_back({t.name, t.dtype, t.shape, file.bytes(t), file.path()});
  }
  return out;
}

// A shard must be a file of the checkpoint's folder (or a folder below it): never absolute,
// never "..". Names are checked as written, not resolved, since Hugging Face's cache links
// each file of a snapshot folder to a blob elsewhere.
void check_shard_name(const std::string& shard, const std::string& tensor,
                      const std::string& index_path) {
  if (shard.empty()) throw_error(index_path, ": tensor '", tensor, "' has an empty shard name");
  if (shard.find('\0') != std::string::npos) {
    throw_error(index_path, ": the shard name of tensor '", tensor, "' holds a NUL character");
  }
  const std::string where = cat(index_path, ": shard '", shard, "' (of tensor '", tensor, "')");
  if (shard[0] == '/') throw_error(where, ": is an absolute path; shards live beside the index");
  std::size_t begin = 0;
  while (begin <= shard.size()) {
    std::size_t end = shard.find('/', begin);
    if (end == std::string::npos) end = shard.size();
    if (shard.compare(begin, end - begin, "..") == 0) {
      throw_error(where, ": has a '..' component; shards live beside the index");
    }
    begin = end + 1;
  }
}

// weight_map as tensor -> shard, after checking the index's shape and every shard name.
std::map<std::string, std::string> read_weight_map(const std::string& index_path) {
  const nlohmann::json index = read_json_file(index_path);
  if (!index.is_object()) throw_error(index_path, ": a checkpoint index must be a JSON object");
  auto it = index.find("weight_map");
  if (it == index.end() || !it->is_object()) {
    throw_error(index_path, ": no \"weight_map\" object (tensor name -> shard file)");
  }
  if (it->empty()) throw_error(index_path, ": \"weight_map\" is empty");
  std::map<std::string, std::string> map;
  for (const auto& [tensor, shard] : it->items()) {
    if (!shard.is_string()) {
      throw_error(index_path, ": weight_map entry '", tensor, "' must be a file name string");
    }
    check_shard_name(shard.get<std::string>(), tensor, index_path);
    map[tensor] = shard.get<std::string>();
  }
  return map;
}

std::string parent_dir(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
}

}  // namespace

void read_f32(const CheckpointTensor& t, float* out) {
  if (!is_floating(t.dtype)) {
    throw_error(t.file, ": tensor '", t.name, "' has dtype ", safetensors_dtype_name(t.dtype),
                "; expected a floating-point tensor (F32, F16, BF16 or F64)");
  }
  floating_to_f32(t.dtype, t.bytes.data(), static_cast<std::size_t>(t.shape.numel()), out);
}

void Checkpoint::add_file(const std::string& path, CheckpointFormat format) {
  if (format == CheckpointFormat::kSafetensors) {
    safetensors_.push_back(SafetensorsFile::open(path));
    add(tensors_of(safetensors_.back()));
  } else {
    pytorch_.push_back(PytorchFile::open(path));
    add(pytorch_.back().tensors());
  }
}

Checkpoint Checkpoint::open(const std::string& path, CheckpointFormat format) {
  Checkpoint c;
  c.path_ = path;
  c.add_file(path, format);
  return c;
}

Checkpoint Checkpoint::open_sharded(const std::string& index_path, CheckpointFormat format) {
  const std::map<std::string, std::string> weight_map = read_weight_map(index_path);
  const std::string dir = parent_dir(index_path);
  std::map<std::string, std::string> first_tensor;  // shard -> a tensor mapped to it
  for (const auto& [tensor, shard] : weight_map) first_tensor.emplace(shard, tensor);

  Checkpoint c;
  c.path_ = index_path;
  for (const auto& [shard, tensor] : first_tensor) {
    const std::string path = join_path(dir, shard);
    if (!path_exists(path) || is_directory(path)) {
      throw_error(index_path, ": shard '", shard, "' (of tensor '", tensor, "') is not a file in ",
                  dir);
    }
    c.add_file(path, format);
  }
  for (const auto& [tensor, shard] : weight_map) {
    const CheckpointTensor* t = c.find(tensor);
    const std::string path = join_path(dir, shard);
    if (t == nullptr) {
      throw_error(index_path, ": maps tensor '", tensor, "' to shard ", path,
                  ", which does not hold it");
    }
    if (t->file != path) {
      throw_error(index_path, ": maps tensor '", tensor, "' to shard ", path,
                  ", but it is in shard ", t->file);
    }
  }
  return c;
}

Checkpoint Checkpoint::view(const SafetensorsFile& file) {
  Checkpoint c;
  c.path_ = file.path();
  c.add(tensors_of(file));
  return c;
}

const CheckpointTensor* Checkpoint::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

void Checkpoint::add(const std::vector<CheckpointTensor>& tensors) {
  for (const CheckpointTensor& t : tensors) {
    auto [it, inserted] = index_.emplace(t.name, tensors_.size());
    if (!inserted) {
      throw_error(path_, ": tensor '", t.name, "' is in two shards: ", tensors_[it->second].file,
                  " and ", t.file);
    }
    tensors_.push_back(t);
  }
}

}  // namespace bertfit
