// libFuzzer target: the safetensors header parser must reject any input with bertfit::Error
// (never crash, hang or read out of bounds); accepted headers must describe in-range tensors.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "base/error.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    bertfit::SafetensorsHeader h = bertfit::parse_safetensors_header(bytes, "fuzz.safetensors");
    // Invariants the reader relies on.
    for (const auto& t : h.tensors) {
      if (t.begin > t.end || h.data_start + t.end > size) std::abort();
      std::uint64_t numel = static_cast<std::uint64_t>(t.shape.numel());
      if (numel * bertfit::safetensors_dtype_size(t.dtype) != t.bytes()) std::abort();
    }
  } catch (const bertfit::Error&) {
  }
  return 0;
}
