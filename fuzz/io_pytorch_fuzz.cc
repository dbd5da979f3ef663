// libFuzzer target: the PyTorch checkpoint reader (zip directory, restricted pickle machine,
// storage views) must reject any input with bertfit::Error (never crash, hang, leak or read out
// of bounds); every tensor it accepts must view bytes inside the input, as many as its shape
// and dtype need. An input that is not a zip is also run as a bare data.pkl, so mutations reach
// the pickle machine without having to form a zip archive first.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "base/error.h"
#include "io/checkpoint_tensor.h"
#include "io/pickle.h"
#include "io/pytorch.h"
#include "io/zip.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    for (const bertfit::CheckpointTensor& t : bertfit::parse_pytorch_checkpoint(bytes, "f.bin")) {
      const auto numel = static_cast<std::uint64_t>(t.shape.numel());
      if (numel * bertfit::safetensors_dtype_size(t.dtype) != t.bytes.size()) std::abort();
      if (!t.bytes.empty() && (t.bytes.data() < bytes.data() ||
                               t.bytes.data() + t.bytes.size() > bytes.data() + bytes.size())) {
        std::abort();
      }
      if (bertfit::is_floating(t.dtype)) {
        std::vector<float> out(numel);
        bertfit::read_f32(t, out.data());
      }
    }
  } catch (const bertfit::Error&) {
  }
  if (!bertfit::looks_like_zip(bytes)) {
    try {
      bertfit::PickledStateDict dict = bertfit::unpickle_state_dict(bytes, "data.pkl");
      for (const auto& t : dict.tensors) {
        if (t.storage >= dict.storages.size() || t.size.size() != t.stride.size()) std::abort();
      }
    } catch (const bertfit::Error&) {
    }
  }
  return 0;
}
