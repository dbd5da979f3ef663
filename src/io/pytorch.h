// PyTorch checkpoints as torch.save writes them since PyTorch 1.6 (and transformers'
// save_pretrained with safe_serialization=False: pytorch_model.bin): a zip archive (zip.h)
// holding <prefix>/data.pkl, the pickled state dict, and one record <prefix>/data/<key> per
// storage, plus <prefix>/version and, since PyTorch 2.1, <prefix>/byteorder. data.pkl runs on
// bertfit's own restricted unpickler (pickle.h); nothing in a checkpoint is ever executed.
// Tensors are contiguous views of their storage records inside the mapped file, so several
// tensors may share one storage (tied weights), each at its own offset.
//
// Refused, each with a message that names the file (and the tensor or global): the legacy
// (pre-1.6, non-zip) format, TorchScript archives, big-endian data, any global a state dict
// does not need, storages whose record is missing or of the wrong size, views outside their
// storage, and non-contiguous views. Integer and boolean tensors are read and reported with
// their dtype (is_floating false), as safetensors' are.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "io/checkpoint_tensor.h"
#include "io/mapped_file.h"

namespace bertfit {

// The state dict of a complete PyTorch checkpoint held in `file`, in its order; the tensors'
// bytes are views into `file` and their `file` field is `source`. Throws Error naming `source`
// for everything listed above and for a malformed zip or pickle. Pure (no I/O): the fuzzer
// calls it.
std::vector<CheckpointTensor> parse_pytorch_checkpoint(std::span<const std::byte> file,
                                                       const std::string& source);

// A read-only, memory-mapped PyTorch checkpoint (pytorch_model.bin or one of its shards).
class PytorchFile {
 public:
  static PytorchFile open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  // Valid (bytes included) while this object lives; moving it keeps them valid.
  const std::vector<CheckpointTensor>& tensors() const { return tensors_; }

 private:
  MappedFile file_;
  std::vector<CheckpointTensor> tensors_;
};

}  // namespace bertfit
