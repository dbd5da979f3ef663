// hf_hub_download for one file: metadata HEAD, locked and resumable blob download, snapshot link.
#include "hub/fetch.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "base/check.h"
#include "base/error.h"
#include "base/file.h"
#include "base/log.h"
#include "hub/http.h"

namespace bertfit::hub {

struct RepoFetcher::Metadata {
  std::string commit;    // X-Repo-Commit
  std::string etag;      // X-Linked-Etag, else ETag; W/ and quotes removed (_normalize_etag)
  long long size = -1;   // X-Linked-Size, else Content-Length
  std::string location;  // the Location of a redirect (a large file's CDN URL), else the URL
};

struct RepoFetcher::HeadAnswer {
  enum Kind { kOk, kMissing, kFailed } kind = kFailed;
  Metadata meta;  // kOk; kMissing: commit only, when the Hub sent one
  Failure failure = Failure::kNone;
  std::string message;  // kFailed
};

namespace {

constexpr int kMaxRedirects = 10;
// A download resumes after this many consecutive interruptions without progress, then fails
// (http_get's _nb_retries).
constexpr int kMaxResumesWithoutProgress = 5;
constexpr long long kProgressMinBytes = 10ll << 20;

double megabytes(long long bytes) { return static_cast<double>(bytes) / 1e6; }

std::optional<long long> parse_size(const std::optional<std::string>& text) {
  if (!text || text->empty()) return std::nullopt;
  long long value = 0;
  for (char c : *text) {
    if (c < '0' || c > '9' || value > (1ll << 50)) return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

std::string normalize_etag(std::string etag) {
  if (etag.starts_with("W/")) etag.erase(0, 2);
  while (!etag.empty() && etag.front() == '"') etag.erase(0, 1);
  while (!etag.empty() && etag.back() == '"') etag.pop_back();
  return etag;
}

// Owns a file descriptor.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

void sync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// A throttled "downloading ..." line on stderr for one large file: redrawn in place at most 5
// times a second on a terminal, a new line every 10 s otherwise.
class Progress {
 public:
  Progress(std::string name, long long total, long long start, bool enabled)
      : name_(std::move(name)),
        total_(total),
        start_(start),
        enabled_(enabled && total >= kProgressMinBytes),
        tty_(::isatty(STDERR_FILENO) == 1),
        begin_(Clock::now()),
        last_(begin_) {}

  void update(long long done) {
    if (!enabled_) return;
    const auto now = Clock::now();
    if (now - last_ < (tty_ ? std::chrono::milliseconds(200) : std::chrono::seconds(10))) return;
    last_ = now;
    print(done, false);
  }
  void finish(long long done) {
    if (enabled_) print(done, true);
  }

 private:
  using Clock = std::chrono::steady_clock;
  void print(long long done, bool last) {
    const double seconds = std::chrono::duration<double>(Clock::now() - begin_).count();
    const double rate = seconds > 0 ? megabytes(done - start_) / seconds : 0.0;
    std::fprintf(stderr, "%sdownloading %s: %.1f / %.1f MB (%d%%), %.1f MB/s%s", tty_ ? "\r" : "",
                 name_.c_str(), megabytes(done), megabytes(total_),
                 static_cast<int>(100.0 * static_cast<double>(done) /
                                  static_cast<double>(std::max(total_, 1ll))),
                 rate, tty_ && !last ? "   " : "\n");
    std::fflush(stderr);
  }
  std::string name_;
  long long total_, start_;
  bool enabled_, tty_;
  Clock::time_point begin_, last_;
};

}  // namespace

std::string sha256_file_hex(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) throw_error(path, ": cannot open (", std::strerror(errno), ")");
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  CHECK(ctx && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) == 1, "sha256 init");
  std::vector<char> buffer(1 << 20);
  while (true) {
    const ssize_t n = ::read(fd.get(), buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_error(path, ": read error (", std::strerror(errno), ")");
    if (n == 0) break;
    CHECK(EVP_DigestUpdate(ctx.get(), buffer.data(), static_cast<size_t>(n)) == 1, "sha256 update");
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  CHECK(EVP_DigestFinal_ex(ctx.get(), digest, &length) == 1, "sha256 final");
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return hex;
}

RepoFetcher::RepoFetcher(const HubOptions& options, const std::string& repo_id)
    : options_(options),
      repo_id_(repo_id),
      endpoint_origin_(url_origin(options.endpoint)),
      cache_(options.cache_dir, repo_id),
      http_(std::make_unique<HttpClient>()) {
  if (endpoint_origin_.empty()) {
    throw_error("the Hub endpoint '", options.endpoint,
                "' is not an http:// or https:// URL (HF_ENDPOINT)");
  }
  if (options.cache_dir.empty()) throw_error("no Hub cache folder: set HF_HUB_CACHE or HF_HOME");
  for (char c : options.token) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      throw_error("the Hub token contains a line break or control character (HF_TOKEN)");
    }
  }
}

RepoFetcher::~RepoFetcher() = default;

std::vector<std::string> RepoFetcher::auth_headers(const std::string& url) const {
  // Only the endpoint's own origin sees the token: a large file's redirect to a CDN (another
  // host) goes without it, as huggingface_hub drops `authorization` when the netloc changes.
  if (options_.token.empty() || url_origin(url) != endpoint_origin_) return {};
  return {"Authorization: Bearer " + options_.token};
}

FileResult RepoFetcher::fetch(const std::string& revision, const std::string& file) {
  check_repo_path(file, "file name", cat("'", repo_id_, "'"));
  if (is_commit_hash(revision)) {
    // A commit's files never change: a cached answer needs no request (as hf_hub_download's
    // commit-hash shortcut and transformers' .no_exist check).
    if (cache_.has_file(revision, file)) {
      return {Lookup::kFound, revision, cache_.pointer_path(revision, file)};
    }
    if (cache_.marked_missing(revision, file)) return {Lookup::kMissing, revision, ""};
  }
  if (!options_.offline && failure_ == Failure::kNone) {
    HeadAnswer answer = head(revision, file);
    if (answer.kind == HeadAnswer::kOk) {
      return {Lookup::kFound, answer.meta.commit, download(revision, file, answer.meta)};
    }
    if (answer.kind == HeadAnswer::kMissing) {
      const std::string& commit = answer.meta.commit;
      if (!commit.empty()) {
        cache_.mark_missing(commit, file);
        cache_.write_ref(revision, commit);
      }
      return {Lookup::kMissing, commit, ""};
    }
    failure_ = answer.failure;
    failure_message_ = answer.message;
  }
  const std::optional<std::string> commit =
      is_commit_hash(revision) ? std::optional<std::string>(revision) : cache_.read_ref(revision);
  if (commit) {
    if (cache_.has_file(*commit, file)) {
      if (!options_.offline && !warned_fallback_) {
        log_warn(failure_message_, "; using the cached snapshot ", *commit, " of '", repo_id_, "'");
        warned_fallback_ = true;
      }
      return {Lookup::kFound, *commit, cache_.pointer_path(*commit, file)};
    }
    if (cache_.marked_missing(*commit, file)) return {Lookup::kMissing, *commit, ""};
  }
  return {Lookup::kNotCached, commit.value_or(""), ""};
}

void RepoFetcher::throw_not_cached(const std::string& revision, const std::string& what) const {
  const std::string missing = cat("the cache ", options_.cache_dir, " has no ", what, " of '",
                                  repo_id_, "' at revision '", revision, "'");
  if (options_.offline) {
    throw_error("offline mode (HF_HUB_OFFLINE) and ", missing,
                "; run once with network access to download it");
  }
  switch (failure_) {
    case Failure::kRefused:  // a missing, private or gated repository: its own message
      throw_error(failure_message_);
    case Failure::kTransport:
      throw_error(failure_message_, " and ", missing,
                  "; check the network (with HF_HUB_OFFLINE=1 only cached models are used)");
    case Failure::kServer:
    case Failure::kNone:
      break;
  }
  throw_error(failure_message_, " and ", missing);
}

RepoFetcher::HeadAnswer RepoFetcher::head(const std::string& revision, const std::string& file) {
  std::string url = cat(options_.endpoint, "/", repo_id_, "/resolve/", url_quote(revision, false),
                        "/", url_quote(file, true));
  HttpResult r;
  for (int hops = 0;; ++hops) {
    HttpRequest request;
    request.head = true;
    request.url = url;
    request.headers = auth_headers(url);
    request.headers.push_back("Accept-Encoding: identity");  // the real size, not a gzip's
    request.timeout_s = options_.metadata_timeout_s;
    request.connect_timeout_s = options_.metadata_timeout_s;
    r = http_->perform(request);
    HeadAnswer failed;
    failed.failure = Failure::kTransport;
    if (r.transport != Transport::kOk) {
      failed.message =
          cat("cannot reach the Hub at ", options_.endpoint, " (", r.transport_message, ")");
      return failed;
    }
    const std::optional<std::string> location = r.headers.get("Location");
    if (r.status < 300 || r.status > 399 || !location || !is_relative_reference(*location)) break;
    if (hops == kMaxRedirects) {
      failed.failure = Failure::kServer;
      failed.message = cat(options_.endpoint, " redirected ", file, " of '", repo_id_,
                           "' more than ", kMaxRedirects, " times");
      return failed;
    }
    url = resolve_url(url, *location);  // a renamed repository: same host, token kept
  }

  HeadAnswer answer;
  const std::string status = cat("HTTP ", r.status);
  const std::string page = cat(options_.endpoint, "/", repo_id_);
  if (r.status >= 400) {
    // hf_raise_for_status: the Hub's X-Error-Code tells a missing revision, file or repository
    // and a gated one apart; a 401 without it is a repository we may not see.
    const std::string code = r.headers.get("X-Error-Code").value_or("");
    const std::string hub_message = r.headers.get("X-Error-Message").value_or("");
    answer.kind = HeadAnswer::kFailed;
    answer.failure = Failure::kRefused;
    if (code == "RevisionNotFound") {
      throw_error("revision '", revision, "' not found in '", repo_id_, "' at ", options_.endpoint,
                  " (", status, "): give a branch, a tag or a commit hash");
    }
    if (code == "EntryNotFound" || (r.status == 404 && code.empty())) {
      answer.kind = HeadAnswer::kMissing;
      const std::string commit = r.headers.get("X-Repo-Commit").value_or("");
      if (code == "EntryNotFound" && is_commit_hash(commit)) answer.meta.commit = commit;
      return answer;
    }
    if (code == "GatedRepo") {
      answer.message = options_.token.empty()
                           ? cat("'", repo_id_, "' is a gated repository (", status,
                                 "): accept its conditions at ", page, " and set HF_TOKEN")
                           : cat("your Hub token has no access to the gated repository '", repo_id_,
                                 "' (", status, "): request access at ", page);
    } else if (hub_message == "Access to this resource is disabled.") {
      answer.message = cat("access to '", repo_id_, "' is disabled on the Hub (", status, ")");
    } else if (code == "RepoNotFound" || r.status == 401) {
      answer.message =
          options_.token.empty()
              ? cat("repository '", repo_id_, "' not found at ", options_.endpoint, " (", status,
                    "); check the name, or set HF_TOKEN if it is private")
              : cat("repository '", repo_id_, "' not found at ", options_.endpoint,
                    ", or your Hub token cannot access it (", status, ")");
    } else if (r.status == 403) {
      answer.message = cat("the Hub refused access to '", repo_id_, "' (", status, ")",
                           options_.token.empty() ? "; set HF_TOKEN if it is private" : "");
    } else {
      answer.failure = Failure::kServer;
      answer.message =
          cat(options_.endpoint, " answered ", status, " for ", file, " of '", repo_id_, "'");
    }
    return answer;
  }

  // get_hf_file_metadata; a missing commit, etag or size is a FileMetadataError there.
  Metadata& m = answer.meta;
  m.commit = r.headers.get("X-Repo-Commit").value_or("");
  m.etag =
      normalize_etag(r.headers.get("X-Linked-Etag").value_or(r.headers.get("ETag").value_or("")));
  std::optional<std::string> size_text = r.headers.get("X-Linked-Size");
  if (!size_text) size_text = r.headers.get("Content-Length");
  const std::optional<long long> size = parse_size(size_text);
  m.location = url;
  if (const std::optional<std::string> location = r.headers.get("Location");
      location && r.status >= 300) {
    m.location = resolve_url(url, *location);
  }
  answer.failure = Failure::kServer;
  const std::string where = cat(url, " (", status, ")");
  if (!is_commit_hash(m.commit)) {
    answer.message = cat(where, " has no valid X-Repo-Commit header: is ", options_.endpoint,
                         " a Hugging Face Hub? (HF_ENDPOINT)");
    return answer;
  }
  if (!is_safe_etag(m.etag)) {
    answer.message = cat(where, " has no usable ETag");
    return answer;
  }
  if (!size) {
    answer.message = cat(where, " has no file size (X-Linked-Size or Content-Length)");
    return answer;
  }
  m.size = *size;
  if (url_origin(m.location).empty() ||
      (url.starts_with("https:") && !m.location.starts_with("https:"))) {
    answer.message =
        cat(where, " redirects to ", url_origin(m.location).empty() ? "a non-HTTP " : "",
            "an address that is not https");
    return answer;
  }
  answer.kind = HeadAnswer::kOk;
  answer.failure = Failure::kNone;
  return answer;
}

std::string RepoFetcher::download(const std::string& revision, const std::string& file,
                                  const Metadata& m) {
  cache_.write_ref(revision, m.commit);
  const std::string pointer = cache_.pointer_path(m.commit, file);
  if (cache_.has_file(m.commit, file)) return pointer;
  const std::string blob = cache_.blob_path(m.etag);
  FileLock lock(cache_.lock_path(m.etag));  // another process may be writing the same blob
  std::error_code ec;
  if (!std::filesystem::exists(blob, ec)) download_blob(file, m, blob);
  if (!cache_.has_file(m.commit, file)) cache_.link_snapshot(m.commit, file, m.etag);
  return pointer;
}

void RepoFetcher::download_blob(const std::string& file, const Metadata& m,
                                const std::string& blob) {
  const std::string dir = std::filesystem::path(blob).parent_path().string();
  make_directories(dir);
  const std::string incomplete = blob + ".incomplete";
  // Created with mode 0666 less the user's umask, as the rest of the cache.
  Fd fd(::open(incomplete.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666));
  if (fd.get() < 0) throw_error(incomplete, ": cannot create (", std::strerror(errno), ")");
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw_error(incomplete, ": ", std::strerror(errno));
  long long offset = st.st_size;
  const auto truncate = [&] {
    if (::ftruncate(fd.get(), 0) != 0) throw_error(incomplete, ": ", std::strerror(errno));
    offset = 0;
  };
  if (offset > m.size) truncate();
  const std::string name = cat(repo_id_, "/", file);
  if (offset > 0) log_info("resuming ", name, " at ", offset, " of ", m.size, " bytes");
  if (struct statvfs fs{}; ::statvfs(dir.c_str(), &fs) == 0) {
    const auto free_bytes =
        static_cast<long long>(fs.f_bavail) * static_cast<long long>(fs.f_frsize);
    if (free_bytes < m.size - offset) {
      log_warn("only ", megabytes(free_bytes), " MB free in ", dir, "; ", name, " needs ",
               megabytes(m.size - offset), " MB more");
    }
  }

  Progress progress(name, m.size, offset, options_.progress);
  int resumes_without_progress = 0;
  while (offset < m.size) {
    const long long attempt_start = offset;
    int write_errno = 0;
    bool too_long = false, first_chunk = true;
    const BodySink sink = [&](const HttpResult& response, const char* data, size_t size) {
      if (first_chunk) {
        first_chunk = false;
        // A server that ignores Range sends the whole file again (200).
        if (response.status == 200 && offset > 0) truncate();
      }
      if (offset + static_cast<long long>(size) > m.size) {
        too_long = true;
        return false;
      }
      if (!write_all(fd.get(), data, size)) {
        write_errno = errno;
        return false;
      }
      offset += static_cast<long long>(size);
      progress.update(offset);
      return true;
    };

    std::string url = m.location;
    HttpResult r;
    for (int hops = 0;; ++hops) {
      HttpRequest request;
      request.url = url;
      request.headers = auth_headers(url);
      if (offset > 0) request.headers.push_back(cat("Range: bytes=", offset, "-"));
      request.stall_s = options_.download_timeout_s;
      request.connect_timeout_s = options_.download_timeout_s;
      r = http_->perform(request, sink);
      const std::optional<std::string> location = r.headers.get("Location");
      if (r.transport != Transport::kOk || r.status < 300 || r.status > 399 || !location) break;
      // The CDN may redirect again; the token still goes only to the endpoint's origin.
      const std::string next = resolve_url(url, *location);
      if (hops == kMaxRedirects || url_origin(next).empty() ||
          (url.starts_with("https:") && !next.starts_with("https:"))) {
        throw_error("download of ", name, ": refusing the redirect from ", url_origin(url), " to ",
                    url_origin(next).empty() ? next : url_origin(next));
      }
      url = next;
    }

    const std::string host = url_origin(url);
    if (r.transport == Transport::kSinkFailed) {
      if (too_long) {
        ::unlink(incomplete.c_str());
        throw_error("download of ", name, " from ", host, ": more bytes than the ", m.size,
                    " the Hub announced; the partial download was removed, run again");
      }
      if (write_errno == ENOSPC || write_errno == EDQUOT) {
        throw_error("disk full writing ", incomplete, " (", offset, " of ", m.size,
                    " bytes): free space or set HF_HUB_CACHE to a larger disk; the download "
                    "resumes from here next time");
      }
      throw_error(incomplete, ": write failed (", std::strerror(write_errno), ")");
    }
    if (r.transport == Transport::kOk && r.status == 416 && offset > 0) {
      truncate();  // the server will not resume from what we hold: start again
    } else if (r.transport == Transport::kOk && r.status >= 400) {
      throw_error("download of ", name, " from ", host, " failed (HTTP ", r.status, ")",
                  r.status == 401 || r.status == 403 ? ": access refused" : "");
    } else if (r.transport == Transport::kOk && r.status >= 300) {
      throw_error("download of ", name, " from ", host, ": HTTP ", r.status, " without a Location");
    } else if (r.transport != Transport::kOk && r.transport != Transport::kCut &&
               r.transport != Transport::kTimeout) {
      throw_error("cannot download ", name, " from ", host, " (", r.transport_message, ")",
                  offset > 0 ? "; the partial download resumes on the next run" : "");
    }
    if (offset >= m.size) break;
    // Cut, stalled or short: resume from where the file ends (http_get's retry loop).
    resumes_without_progress = offset > attempt_start ? 0 : resumes_without_progress + 1;
    const std::string why = r.transport_message.empty() ? "connection closed" : r.transport_message;
    if (resumes_without_progress > kMaxResumesWithoutProgress) {
      throw_error("download of ", name, " from ", host, " keeps failing at ", offset, " of ",
                  m.size, " bytes (", why, "); run again to resume");
    }
    log_warn("download of ", name, " interrupted at ", offset, " of ", m.size, " bytes (", why,
             "); resuming");
    if (resumes_without_progress > 0) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  progress.finish(offset);

  if (::fsync(fd.get()) != 0) {
    const int err = errno;
    throw_error(incomplete, ": ",
                err == ENOSPC || err == EDQUOT ? "disk full; free space or set HF_HUB_CACHE"
                                               : std::strerror(err));
  }
  ::close(fd.release());
  if (::stat(incomplete.c_str(), &st) != 0 || st.st_size != m.size) {
    ::unlink(incomplete.c_str());
    throw_error("download of ", name, ": ", st.st_size, " bytes instead of ", m.size,
                "; the download was removed, run again");
  }
  // A large (LFS) file's etag is its sha256: check what arrived, resumed parts included.
  if (is_sha256_hex(m.etag)) {
    const std::string digest = sha256_file_hex(incomplete);
    if (digest != m.etag) {
      ::unlink(incomplete.c_str());
      throw_error(name, " is corrupt: its sha256 is ", digest, " but the Hub's etag is ", m.etag,
                  "; the download was removed, run again");
    }
  }
  if (::rename(incomplete.c_str(), blob.c_str()) != 0) {
    throw_error(blob, ": cannot move the download into place (", std::strerror(errno), ")");
  }
  sync_directory(dir);
}

}  // namespace bertfit::hub
