// Writing a state dict of fp32 tensors as torch.save writes it since PyTorch 1.6 (the zip
// container of io/zip.h holding archive/data.pkl, archive/data/<i> and archive/version), so that
// torch.load — and with it sentence-transformers 2.2.2's Dense.load, which reads only
// pytorch_model.bin — loads it. The pickle is the smallest one torch.load accepts: an OrderedDict
// of torch._utils._rebuild_tensor_v2 calls over FloatStorage records (contiguous, offset 0, no
// gradient). Knows the format, not models.
#pragma once

#include <string>
#include <vector>

#include "io/safetensors.h"

namespace bertfit {

// The file's bytes for these tensors (each F32, name -> tensor in this order).
std::string pytorch_state_dict_bytes(const std::vector<TensorToWrite>& tensors);

// Writes them to path atomically.
void write_pytorch_state_dict(const std::string& path, const std::vector<TensorToWrite>& tensors);

}  // namespace bertfit
