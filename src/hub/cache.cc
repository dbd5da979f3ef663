// The Hugging Face cache layout: names checked, refs, snapshot links, .no_exist marks, locks.
#include "hub/cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/check.h"
#include "base/error.h"
#include "base/file.h"
#include "base/log.h"

namespace bertfit::hub {
namespace {

bool is_lower_hex(std::string_view s, size_t length) {
  return s.size() == length && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// True when path, lexically normalised, lies strictly inside dir.
bool lexically_inside(const std::string& path, const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path p = fs::path(path).lexically_normal();
  const fs::path d = fs::path(dir).lexically_normal();
  const fs::path rel = p.lexically_relative(d);
  return !rel.empty() && *rel.begin() != ".." && rel != ".";
}

}  // namespace

bool is_commit_hash(std::string_view s) { return is_lower_hex(s, 40); }

bool is_sha256_hex(std::string_view s) { return is_lower_hex(s, 64); }

bool is_safe_etag(std::string_view s) {
  if (s.empty() || s.size() > 128 || s == "." || s == "..") return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' ||
           c == '_' || c == '-';
  });
}

void check_repo_path(const std::string& name, const std::string& what, const std::string& source) {
  const auto refuse = [&](const char* why) {
    throw_error("refusing the ", what, " '", name, "' from ", source, ": ", why);
  };
  if (name.empty()) refuse("it is empty");
  if (name.front() == '/') refuse("an absolute path would leave the cache");
  for (char c : name) {
    if (c == '\\') refuse("backslashes are not allowed");
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) refuse("control characters");
  }
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find('/', start);
    if (end == std::string::npos) end = name.size();
    const std::string_view part(name.data() + start, end - start);
    if (part == "..") refuse("'..' would leave the cache");
    if (part.empty() || part == ".") refuse("empty or '.' path components");
    if (part.size() > 255) refuse("a path component is longer than 255 bytes");
    start = end + 1;
  }
}

std::string repo_folder_name(const std::string& repo_id) {
  std::string name = "models";
  size_t start = 0;
  while (true) {
    const size_t slash = repo_id.find('/', start);
    name += "--";
    name += repo_id.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return name;
}

RepoCache::RepoCache(const std::string& cache_dir, const std::string& repo_id)
    : cache_dir_(cache_dir),
      folder_(join_path(cache_dir, repo_folder_name(repo_id))),
      locks_(join_path(join_path(cache_dir, ".locks"), repo_folder_name(repo_id))) {}

std::string RepoCache::snapshot_dir(const std::string& commit) const {
  CHECK(is_commit_hash(commit), commit);
  return join_path(join_path(folder_, "snapshots"), commit);
}

std::string RepoCache::pointer_path(const std::string& commit, const std::string& file) const {
  const std::string dir = snapshot_dir(commit);
  const std::string path = join_path(dir, file);
  CHECK(lexically_inside(path, dir), "unchecked file name ", file);  // as _get_pointer_path
  return path;
}

std::string RepoCache::blob_path(const std::string& etag) const {
  CHECK(is_safe_etag(etag), etag);
  return join_path(join_path(folder_, "blobs"), etag);
}

std::string RepoCache::lock_path(const std::string& etag) const {
  CHECK(is_safe_etag(etag), etag);
  return join_path(locks_, etag + ".lock");
}

std::optional<std::string> RepoCache::read_ref(const std::string& revision) const {
  const std::string path = join_path(join_path(folder_, "refs"), revision);
  CHECK(lexically_inside(path, join_path(folder_, "refs")), "unchecked revision ", revision);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  std::string text = read_file(path);
  const size_t begin = text.find_first_not_of(" \t\r\n");
  const size_t end = text.find_last_not_of(" \t\r\n");
  if (begin == std::string::npos) return std::nullopt;
  text = text.substr(begin, end - begin + 1);
  if (!is_commit_hash(text)) {
    log_warn(path, ": not a commit hash; ignoring this cached reference");
    return std::nullopt;
  }
  return text;
}

void RepoCache::write_ref(const std::string& revision, const std::string& commit) const {
  CHECK(is_commit_hash(commit), commit);
  if (revision == commit || read_ref(revision) == commit) return;
  const std::string path = join_path(join_path(folder_, "refs"), revision);
  make_directories(std::filesystem::path(path).parent_path().string());
  write_file_atomic(path, commit);
}

bool RepoCache::has_file(const std::string& commit, const std::string& file) const {
  std::error_code ec;
  return std::filesystem::exists(pointer_path(commit, file), ec);
}

bool RepoCache::marked_missing(const std::string& commit, const std::string& file) const {
  const std::string path = join_path(join_path(join_path(folder_, ".no_exist"), commit), file);
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

void RepoCache::mark_missing(const std::string& commit, const std::string& file) const {
  CHECK(is_commit_hash(commit), commit);
  const std::string dir = join_path(join_path(folder_, ".no_exist"), commit);
  const std::string path = join_path(dir, file);
  CHECK(lexically_inside(path, dir), "unchecked file name ", file);
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) {
    log_warn(path, ": cannot record that the file does not exist (", std::strerror(errno), ")");
    return;
  }
  ::close(fd);
}

void RepoCache::link_snapshot(const std::string& commit, const std::string& file,
                              const std::string& etag) const {
  const std::string pointer = pointer_path(commit, file);
  std::string target;
  const auto depth = std::count(file.begin(), file.end(), '/');
  for (long i = 0; i < 2 + depth; ++i) target += "../";
  target += "blobs/" + etag;
  make_directories(std::filesystem::path(pointer).parent_path().string());
  const std::string tmp = cat(pointer, ".tmp.", ::getpid());
  ::unlink(tmp.c_str());
  if (::symlink(target.c_str(), tmp.c_str()) != 0 || ::rename(tmp.c_str(), pointer.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw_error(pointer, ": cannot link the snapshot file to its blob (", std::strerror(err), ")");
  }
}

FileLock::FileLock(const std::string& path) {
  make_directories(std::filesystem::path(path).parent_path().string());
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd_ < 0) throw_error(path, ": cannot open the lock file (", std::strerror(errno), ")");
  if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
  if (errno == EWOULDBLOCK) {
    log_info("waiting for ", path, ": another process is downloading this file");
  }
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno != EINTR) {
      const int err = errno;
      ::close(fd_);
      throw_error(path, ": cannot lock (", std::strerror(err), ")");
    }
  }
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

}  // namespace bertfit::hub
