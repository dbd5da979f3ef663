// One file of one repository into the cache, as huggingface_hub's hf_hub_download does it
// (file_download.py: _hf_hub_download_to_cache_dir, get_hf_file_metadata,
// _get_metadata_or_catch_error, _download_to_tmp_and_move, http_get):
//   1. HEAD {endpoint}/{repo}/resolve/{revision}/{file} with Accept-Encoding: identity,
//      following relative redirects only (a renamed repository); the commit comes from
//      X-Repo-Commit, the etag from X-Linked-Etag else ETag, the size from X-Linked-Size else
//      Content-Length, and a large file's download URL from the Location of its redirect.
//   2. GET into blobs/{etag}.incomplete under the .locks/ lock, resumed with Range: bytes=N-
//      after an interruption, the size checked and a sha256 etag verified, renamed into place.
//   3. snapshots/{commit}/{file} linked to the blob; refs/{revision} records the commit.
// The token goes only to the endpoint's origin. When the Hub cannot be asked (offline,
// unreachable, or it refuses the repository), the answer comes from the cache alone, and the
// error explains why when the cache has none.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "hub/cache.h"
#include "hub/hub.h"

namespace bertfit::hub {

class HttpClient;

// sha256 of a file's contents in lower-case hex; throws Error naming the path if unreadable.
std::string sha256_file_hex(const std::string& path);

enum class Lookup {
  kFound,      // in the snapshot (downloaded now or before)
  kMissing,    // the Hub has no such file at that commit (or the cache recorded so)
  kNotCached,  // the Hub could not be asked and the cache does not know
};

struct FileResult {
  Lookup lookup = Lookup::kNotCached;
  std::string commit;  // the commit the answer is for; "" when unknown
  std::string path;    // kFound: snapshots/{commit}/{file}
};

class RepoFetcher {
 public:
  // Throws Error for options that cannot work (an endpoint that is not http(s), no cache
  // folder, a token with line breaks).
  RepoFetcher(const HubOptions& options, const std::string& repo_id);
  ~RepoFetcher();
  RepoFetcher(const RepoFetcher&) = delete;
  RepoFetcher& operator=(const RepoFetcher&) = delete;

  // file at revision (a branch, tag or commit hash). With a commit hash whose file the cache
  // holds or has marked missing, the network is not used. Throws Error for a revision the Hub
  // does not have, a failed or corrupt download, or a file name that would leave the cache.
  FileResult fetch(const std::string& revision, const std::string& file);

  // The error for something required that fetch() answered kNotCached: why the Hub was not
  // asked (offline mode, unreachable, gated, ...) and that the cache lacks `what`.
  [[noreturn]] void throw_not_cached(const std::string& revision, const std::string& what) const;

  const RepoCache& cache() const { return cache_; }

 private:
  enum class Failure { kNone, kTransport, kRefused, kServer };
  struct Metadata;
  struct HeadAnswer;

  HeadAnswer head(const std::string& revision, const std::string& file);
  std::string download(const std::string& revision, const std::string& file, const Metadata& m);
  void download_blob(const std::string& file, const Metadata& m, const std::string& blob);
  std::vector<std::string> auth_headers(const std::string& url) const;

  HubOptions options_;
  std::string repo_id_;
  std::string endpoint_origin_;
  RepoCache cache_;
  std::unique_ptr<HttpClient> http_;
  // Once a metadata request fails for a reason other than a missing revision or file, every
  // later file is answered from the cache (huggingface_hub falls back per file; asking again
  // would only repeat the failure, or its timeout).
  Failure failure_ = Failure::kNone;
  std::string failure_message_;
  bool warned_fallback_ = false;
};

}  // namespace bertfit::hub
