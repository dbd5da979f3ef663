// File helpers: reading, atomic writes, directories.
#include "base/file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "base/error.h"

namespace bertfit {

std::string read_file(const std::string& path) {
  if (is_directory(path)) throw_error(path, ": is a directory, expected a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error(path, ": cannot open (", std::strerror(errno), ")");
  std::ostringstream os;
  os << in.rdbuf();
  if (in.bad()) throw_error(path, ": read error");
  return os.str();
}

std::string read_stdin() {
  std::ostringstream os;
  os << std::cin.rdbuf();
  if (std::cin.bad()) throw_error("standard input: read error");
  return os.str();
}

void write_file_atomic(const std::string& path, std::string_view data) {
  AtomicFile f(path);
  f.write(data);
  f.commit();
}

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  tmp_path_ = cat(path_, ".tmp.", ::getpid());
  file_ = std::fopen(tmp_path_.c_str(), "wb");
  if (file_ == nullptr) throw_error(path_, ": cannot create (", std::strerror(errno), ")");
}

AtomicFile::~AtomicFile() {
  if (file_ != nullptr) {
    std::fclose(file_);
    std::remove(tmp_path_.c_str());
  }
}

void AtomicFile::write(const void* data, std::size_t bytes) {
  if (bytes == 0) return;
  if (std::fwrite(data, 1, bytes, file_) != bytes) {
    throw_error(path_, ": write failed (", std::strerror(errno), ")");
  }
}

void AtomicFile::commit() {
  bool ok = std::fflush(file_) == 0 && ::fsync(::fileno(file_)) == 0;
  ok = (std::fclose(file_) == 0) && ok;
  file_ = nullptr;
  if (!ok || std::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    int err = errno;
    std::remove(tmp_path_.c_str());
    throw_error(path_, ": cannot write (", std::strerror(err), ")");
  }
}

bool path_exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

bool is_directory(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec);
}

void make_directories(const std::string& dir) {
  std::error_code ec;
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec)) {
    throw_error(dir, ": exists and is not a directory");
  }
  std::filesystem::create_directories(dir, ec);
  if (ec) throw_error(dir, ": cannot create directory (", ec.message(), ")");
}

std::string join_path(const std::string& dir, const std::string& name) {
  return (std::filesystem::path(dir) / name).string();
}

}  // namespace bertfit
