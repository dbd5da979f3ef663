// A restricted unpickler for the data.pkl of a PyTorch checkpoint: a pickle machine of its own
// (Python's pickle is never involved) that builds only what a state dict of tensors holds:
// None, booleans, integers, floats, strings, tuples, lists, dicts, and the few globals such a
// state dict names (collections.OrderedDict, torch._utils._rebuild_tensor_v2,
// torch._utils._rebuild_parameter and torch's storage types), which it interprets itself.
// Every other global is refused when it is read, as torch.load(weights_only=True) does
// (torch/_weights_only_unpickler.py), so nothing a checkpoint names is ever imported or run.
// Storages stay references (key, dtype, element count); pytorch.h resolves them to zip records.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace bertfit {

struct PickledStorage {
  std::string key;  // the record data/<key> of the archive
  SafetensorsDType dtype;
  std::uint64_t numel = 0;  // elements of dtype
};

// A tensor as _rebuild_tensor_v2 describes it: a strided view of a storage.
struct PickledTensor {
  std::string name;          // its key in the state dict
  std::size_t storage = 0;   // index into PickledStateDict::storages
  std::uint64_t offset = 0;  // in elements
  std::vector<std::int64_t> size, stride;
};

struct PickledStateDict {
  std::vector<PickledStorage> storages;  // one per distinct key, in order of first use
  std::vector<PickledTensor> tensors;    // in the state dict's order
};

// Runs `pickle` (protocols 2 to 5, the opcodes a state dict needs) and returns the state dict it
// builds: a dict (or OrderedDict) from unique string keys to tensors. Throws Error naming
// `source` for a refused global (naming its module.name), an unsupported opcode, a malformed or
// truncated pickle, or a result that is not such a dict.
PickledStateDict unpickle_state_dict(std::span<const std::byte> pickle, const std::string& source);

}  // namespace bertfit
