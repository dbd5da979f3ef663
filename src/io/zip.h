// The zip container of PyTorch checkpoints (torch.save since PyTorch 1.6, written by miniz in
// caffe2/serialize/inline_container.cc): entries are stored, never compressed, their data
// aligned by padding in the local header's extra field; local headers carry zero sizes and a
// data descriptor follows each entry (general purpose flag bit 3); a zip64 end-of-directory
// record is always written, and zip64 extra fields hold the sizes and offsets of 4 GiB and
// beyond. The reader therefore trusts the central directory (zip64 fields included) for sizes
// and offsets and reads a local header only to find where an entry's data begins. Knows the
// container, not its contents.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace bertfit {

struct ZipEntry {
  std::string name;
  std::span<const std::byte> data;  // the stored bytes, inside the archive's bytes
};

// True if `file` begins with a zip local-file signature ("PK\3\4").
bool looks_like_zip(std::span<const std::byte> file);

// The entries of a complete zip archive held in `file`, in central-directory order. Throws
// Error naming `source` (and the entry) for a truncated or malformed archive, a multi-disk
// archive, an encrypted or compressed entry, an entry whose data runs outside the file, or a
// name that appears twice. CRCs are not checked (as safetensors, the format has no checksum
// that bertfit verifies); every offset and size is.
std::vector<ZipEntry> read_zip(std::span<const std::byte> file, const std::string& source);

}  // namespace bertfit
