// One tensor of a checkpoint, whatever its format (safetensors, PyTorch zip, sharded): what a
// model loader needs to match it against a layout and read it, and nothing of the format.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "base/shape.h"
#include "io/safetensors.h"

namespace bertfit {

struct CheckpointTensor {
  std::string name;
  // The element type. SafetensorsDType names the types of both formats: PyTorch's storage
  // types map onto it (FloatStorage -> F32, HalfStorage -> F16, LongStorage -> I64, ...).
  SafetensorsDType dtype;
  Shape shape;
  // shape.numel() elements, row-major, little-endian, any alignment; a view into the mapped
  // file (a MappedFile's bytes, never a copy: drop_resident_pages applies), valid while the
  // object that opened it (SafetensorsFile, PytorchFile, Checkpoint) lives.
  std::span<const std::byte> bytes;
  std::string file;  // the file that holds it, for messages
};

// Copies a floating-point tensor into out[0 .. numel) as fp32 (floating_to_f32). Throws Error
// naming the file and the tensor for an integer or boolean tensor.
void read_f32(const CheckpointTensor& tensor, float* out);

}  // namespace bertfit
