// A model's weights in any form transformers saves them: one safetensors file, one PyTorch
// file, or either one sharded behind an index (model.safetensors.index.json,
// pytorch_model.bin.index.json: {"metadata": {...}, "weight_map": {tensor name: shard file}}).
// Both readers hand out CheckpointTensors (name, dtype, shape, bytes), so the model loader
// matches and reads tensors without knowing the format. Files stay mapped, not copied, while
// the Checkpoint lives.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "io/checkpoint_tensor.h"
#include "io/pytorch.h"
#include "io/safetensors.h"

namespace bertfit {

enum class CheckpointFormat { kSafetensors, kPytorch };

class Checkpoint {
 public:
  // One file of the format (SafetensorsFile::open or PytorchFile::open and their Errors).
  static Checkpoint open(const std::string& path, CheckpointFormat format);
  // transformers' sharded form: the index's weight_map names, for every tensor, the shard file
  // (of `format`, beside the index) that holds it; each shard is opened once, as transformers'
  // get_checkpoint_shard_files does, and all of a shard's tensors are part of the checkpoint.
  // Throws Error naming the index for invalid JSON, a missing, empty or ill-typed weight_map,
  // or a shard name that is empty, absolute, contains a ".." component or names no file in the
  // folder; and naming the tensor and the files for a tensor that its shard lacks or that two
  // shards hold.
  static Checkpoint open_sharded(const std::string& index_path, CheckpointFormat format);
  // The tensors of a safetensors file that the caller keeps open (borrowed, not owned).
  static Checkpoint view(const SafetensorsFile& file);

  // The file, or the index of a sharded checkpoint; each tensor names its own file.
  const std::string& path() const { return path_; }
  // A file's tensors in its order; shards in the order of their sorted names.
  const std::vector<CheckpointTensor>& tensors() const { return tensors_; }
  const CheckpointTensor* find(const std::string& name) const;  // nullptr if absent

 private:
  // Appends the tensors of one file; a name already present (from another shard) is an Error.
  void add(const std::vector<CheckpointTensor>& tensors);
  // Opens one file of the checkpoint and adds its tensors.
  void add_file(const std::string& path, CheckpointFormat format);

  std::string path_;
  std::vector<SafetensorsFile> safetensors_;  // owned files (moving them keeps their maps)
  std::vector<PytorchFile> pytorch_;
  std::vector<CheckpointTensor> tensors_;
  std::unordered_map<std::string, std::size_t> index_;
};

}  // namespace bertfit
