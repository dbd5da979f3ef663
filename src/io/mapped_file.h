// A whole file mapped read-only into memory: the checkpoint readers hand out views of its bytes
// instead of copying tensors, so a checkpoint's data is copied once, into the parameters.
#pragma once

#include <cstddef>
#include <span>
#include <string>

namespace bertfit {

class MappedFile {
 public:
  // Maps a regular file; throws Error naming the path if it cannot be opened or mapped.
  static MappedFile open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const std::string& path() const { return path_; }
  // Valid while this object lives; moving it keeps the mapping (and so every view) in place.
  std::span<const std::byte> bytes() const { return {data_, size_}; }

 private:
  void release();

  std::string path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

// Drops the whole pages inside `view`, bytes of a MappedFile, from this process's memory: the
// data stays in the file (and the system's page cache) and a later read maps it in again. For a
// loader that has copied what it needs, so that the file's pages do not stay resident beside
// the copy until the file is closed. Only for views of a MappedFile (on other memory the pages
// would read as zeros).
void drop_resident_pages(std::span<const std::byte> view) noexcept;

}  // namespace bertfit
