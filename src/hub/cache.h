// The Hugging Face cache layout, read and written as huggingface_hub does
// (huggingface_hub/file_download.py: repo_folder_name, _cache_commit_hash_for_specific_revision,
// _create_symlink, _get_pointer_path, try_to_load_from_cache), so that either tool uses the
// other's downloads:
//   {cache}/models--{org}--{name}/refs/{revision}            the commit a branch or tag named
//   {cache}/models--{org}--{name}/blobs/{etag}               file contents, named by etag
//   {cache}/models--{org}--{name}/snapshots/{commit}/{file}  relative symlink to the blob
//   {cache}/models--{org}--{name}/.no_exist/{commit}/{file}  empty: the Hub has no such file
//   {cache}/.locks/models--{org}--{name}/{etag}.lock         flock()ed while a blob is written
// Every name that comes from a user or a server (revision, file, etag, commit) is checked before
// it becomes a path, so nothing is read or written outside the repository's folder.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace bertfit::hub {

// A full commit hash as the Hub names snapshots: 40 lower-case hex digits.
bool is_commit_hash(std::string_view s);
// A sha256 in hex (64 lower-case digits): the etag of a large (LFS) file.
bool is_sha256_hex(std::string_view s);
// An etag usable as a blob's file name: 1-128 characters of A-Z a-z 0-9 . _ -, not "." or "..".
// (The Hub's are a git sha1 or a sha256 in hex.)
bool is_safe_etag(std::string_view s);

// Throws Error unless name is a relative path of ordinary components: not empty, no leading '/',
// no "", "." or ".." component, no backslash or control character. `what` and `source` name
// it in the message ("file name", "model.safetensors.index.json of org/name").
void check_repo_path(const std::string& name, const std::string& what, const std::string& source);

// The folder name of a model repository: "models--org--name" (repo_folder_name).
std::string repo_folder_name(const std::string& repo_id);

// One model repository's folder in the cache. Paths it returns are not created until written.
class RepoCache {
 public:
  RepoCache(const std::string& cache_dir, const std::string& repo_id);

  const std::string& cache_dir() const { return cache_dir_; }
  const std::string& folder() const { return folder_; }
  std::string snapshot_dir(const std::string& commit) const;
  // snapshots/{commit}/{file}; the commit and file must have been checked.
  std::string pointer_path(const std::string& commit, const std::string& file) const;
  std::string blob_path(const std::string& etag) const;
  std::string lock_path(const std::string& etag) const;

  // The commit refs/{revision} names, or nullopt when there is none (or it is not a commit
  // hash). huggingface_hub writes it without a newline; surrounding white space is ignored.
  std::optional<std::string> read_ref(const std::string& revision) const;
  // Records that revision names commit (nothing when revision is that commit, or already
  // recorded). Written atomically.
  void write_ref(const std::string& revision, const std::string& commit) const;

  // True when snapshots/{commit}/{file} exists and resolves (a dangling link does not count).
  bool has_file(const std::string& commit, const std::string& file) const;
  bool marked_missing(const std::string& commit, const std::string& file) const;
  // Creates .no_exist/{commit}/{file}; a failure only warns, as in huggingface_hub.
  void mark_missing(const std::string& commit, const std::string& file) const;
  // Points snapshots/{commit}/{file} at blobs/{etag} with a relative link ("../../blobs/{etag}"
  // for a top-level file), replacing whatever was there atomically.
  void link_snapshot(const std::string& commit, const std::string& file,
                     const std::string& etag) const;

 private:
  std::string cache_dir_;
  std::string folder_;  // {cache}/models--{org}--{name}
  std::string locks_;   // {cache}/.locks/models--{org}--{name}
};

// An exclusive flock() on a lock file, held until destruction. huggingface_hub's FileLock
// (the filelock package) takes flock() on the same files, so the two tools exclude each other.
class FileLock {
 public:
  explicit FileLock(const std::string& path);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace bertfit::hub
