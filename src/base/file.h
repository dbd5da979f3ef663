// Whole-file reading and atomic writing (temporary name, fsync, rename) with errors that name
// the path. Every output bertfit writes goes through write_file_atomic or AtomicFile.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace bertfit {

// Reads a whole file; throws Error naming the path if it is missing or unreadable.
std::string read_file(const std::string& path);
// All of standard input.
std::string read_stdin();

// Writes data to path.tmp.<pid>, fsyncs, renames over path. Throws Error on failure.
void write_file_atomic(const std::string& path, std::string_view data);

// Streaming variant: write(), then commit() renames into place; destruction without commit()
// removes the temporary file, so a failed run leaves no partial output.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, std::size_t bytes);
  void write(std::string_view s) { write(s.data(), s.size()); }
  void commit();

 private:
  std::string path_;
  std::string tmp_path_;
  std::FILE* file_ = nullptr;
};

bool path_exists(const std::string& path);
bool is_directory(const std::string& path);
// Creates dir (and parents); throws Error if it exists as a file or cannot be made.
void make_directories(const std::string& dir);
std::string join_path(const std::string& dir, const std::string& name);

}  // namespace bertfit
