// Options from the environment, repo id syntax, and the files a transformers model needs.
#include "hub/hub.h"

#include <pwd.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>

#include "base/error.h"
#include "base/file.h"
#include "base/log.h"
#include "hub/cache.h"
#include "hub/fetch.h"
#include "hub/http.h"
#include "tokenizer/kind.h"

namespace bertfit {
namespace {

using hub::FileResult;
using hub::Lookup;
using hub::RepoFetcher;

// transformers' from_pretrained order (modeling_utils.py): safetensors before pickles, a single
// file before an index of shards.
constexpr std::array<const char*, 4> kWeightFiles = {
    "model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
    "pytorch_model.bin.index.json"};

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

// constants.py's _is_true.
bool env_true(const char* name) {
  std::string v = env(name).value_or("");
  for (char& c : v) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return v == "1" || v == "ON" || v == "YES" || v == "TRUE";
}

std::string home_dir() {
  if (std::optional<std::string> home = env("HOME")) return *home;
  if (const passwd* pw = ::getpwuid(::getuid()); pw != nullptr && pw->pw_dir != nullptr) {
    return pw->pw_dir;
  }
  throw_error("cannot find the home folder for the Hub cache: set HOME or HF_HOME");
}

// os.path.expanduser for "~" and "~/...".
std::string expand_user(const std::string& path) {
  if (path == "~") return home_dir();
  if (path.starts_with("~/")) return home_dir() + path.substr(1);
  return path;
}

long env_seconds(const char* name, long fallback) {
  const std::optional<std::string> v = env(name);
  if (!v) return fallback;
  char* end = nullptr;
  const long seconds = std::strtol(v->c_str(), &end, 10);
  if (end == v->c_str() || *end != '\0' || seconds <= 0) {
    throw_error(name, "=", *v, ": expected a positive whole number of seconds");
  }
  return seconds;
}

// utils/_auth.py's _clean_token: line breaks removed, then surrounding white space.
std::string clean_token(std::string token) {
  std::erase(token, '\r');
  std::erase(token, '\n');
  const size_t begin = token.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  return token.substr(begin, token.find_last_not_of(" \t") - begin + 1);
}

bool is_repo_id_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

bool is_word_char(char c) { return is_repo_id_char(c) && c != '-' && c != '.'; }

bool is_repo_id_part(std::string_view part) {
  return !part.empty() && is_word_char(part.front()) && is_word_char(part.back()) &&
         std::all_of(part.begin(), part.end(), is_repo_id_char);
}

// The shard files an index.json lists (its weight_map's values), sorted and unique, as
// transformers' get_checkpoint_shard_files reads them.
std::set<std::string> shard_files(const std::string& path, const std::string& source) {
  nlohmann::json index;
  try {
    index = nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw_error(source, ": not valid JSON (", e.what(), ")");
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    throw_error(source, ": no \"weight_map\" object");
  }
  std::set<std::string> files;
  for (const auto& [tensor, file] : index["weight_map"].items()) {
    if (!file.is_string()) throw_error(source, ": the file of tensor ", tensor, " is not a string");
    const std::string name = file.get<std::string>();
    hub::check_repo_path(name, "shard name", source);
    files.insert(name);
  }
  if (files.empty()) throw_error(source, ": the weight_map lists no files");
  return files;
}

void check_revision(const std::string& revision) {
  try {
    hub::check_repo_path(revision, "revision", "the options");
  } catch (const Error&) {
    throw_error("'", revision, "' is not a valid revision: give a branch, a tag or a commit hash");
  }
}

}  // namespace

HubOptions hub_options_from_env() {
  HubOptions o;
  if (std::optional<std::string> endpoint = env("HF_ENDPOINT")) {
    while (endpoint->ends_with('/')) endpoint->pop_back();
    if (hub::url_origin(*endpoint).empty()) {
      throw_error("HF_ENDPOINT=", *endpoint, ": expected an http:// or https:// URL");
    }
    o.endpoint = *endpoint;
  }
  std::string home;
  if (std::optional<std::string> hf_home = env("HF_HOME")) {
    home = expand_user(*hf_home);
  } else {
    const std::string xdg = env("XDG_CACHE_HOME").value_or(home_dir() + "/.cache");
    home = join_path(expand_user(xdg), "huggingface");
  }
  if (std::optional<std::string> cache = env("HF_HUB_CACHE")) {
    o.cache_dir = expand_user(*cache);
  } else if (std::optional<std::string> legacy = env("HUGGINGFACE_HUB_CACHE")) {
    o.cache_dir = expand_user(*legacy);
  } else {
    o.cache_dir = join_path(home, "hub");
  }
  if (std::optional<std::string> token = env("HF_TOKEN")) {
    o.token = clean_token(*token);
  } else if (std::optional<std::string> legacy = env("HUGGING_FACE_HUB_TOKEN")) {
    o.token = clean_token(*legacy);
  } else {
    const std::string token_path =
        expand_user(env("HF_TOKEN_PATH").value_or(join_path(home, "token")));
    if (path_exists(token_path)) o.token = clean_token(read_file(token_path));
  }
  o.offline = env_true("HF_HUB_OFFLINE") || env_true("TRANSFORMERS_OFFLINE");
  o.progress = !env_true("HF_HUB_DISABLE_PROGRESS_BARS");
  o.metadata_timeout_s = env_seconds("HF_HUB_ETAG_TIMEOUT", o.metadata_timeout_s);
  o.download_timeout_s = env_seconds("HF_HUB_DOWNLOAD_TIMEOUT", o.download_timeout_s);
  return o;
}

bool looks_like_repo_id(const std::string& s) {
  if (s.empty() || s.size() > 96 || s.find("--") != std::string::npos ||
      s.find("..") != std::string::npos || s.ends_with(".git")) {
    return false;
  }
  const size_t slash = s.find('/');
  if (slash == std::string::npos) return is_repo_id_part(s);
  return is_repo_id_part(std::string_view(s).substr(0, slash)) &&
         is_repo_id_part(std::string_view(s).substr(slash + 1));
}

ModelSnapshot download_model(const std::string& repo_id, const HubOptions& options) {
  if (!looks_like_repo_id(repo_id)) {
    throw_error("'", repo_id, "' is not a Hub repository id (name or org/name)");
  }
  check_revision(options.revision);
  RepoFetcher fetcher(options, repo_id);
  const std::string& revision = options.revision;

  // config.json first: its answer fixes the commit every other file is fetched at.
  const FileResult config = fetcher.fetch(revision, "config.json");
  if (config.lookup == Lookup::kNotCached) fetcher.throw_not_cached(revision, "config.json");
  if (config.lookup == Lookup::kMissing) {
    if (config.commit.empty()) {
      throw_error("repository '", repo_id, "' not found at ", options.endpoint,
                  " (HTTP 404 for its config.json)");
    }
    throw_error("'", repo_id, "' at revision '", revision,
                "' has no config.json: it is not a transformers model");
  }
  ModelSnapshot snapshot;
  snapshot.commit = config.commit;
  snapshot.folder = fetcher.cache().snapshot_dir(config.commit);
  snapshot.files.push_back("config.json");
  const std::string& commit = snapshot.commit;

  bool weights_not_cached = false;
  for (const char* name : kWeightFiles) {
    const FileResult weights = fetcher.fetch(commit, name);
    if (weights.lookup == Lookup::kNotCached) weights_not_cached = true;
    if (weights.lookup != Lookup::kFound) continue;
    snapshot.weights = name;
    snapshot.files.push_back(name);
    if (std::string_view(name).ends_with(".index.json")) {
      const std::string source = cat(name, " of '", repo_id, "'");
      for (const std::string& shard : shard_files(weights.path, source)) {
        const FileResult part = fetcher.fetch(commit, shard);
        if (part.lookup == Lookup::kNotCached) fetcher.throw_not_cached(commit, shard);
        if (part.lookup == Lookup::kMissing) {
          throw_error(source, " lists ", shard, ", which the repository does not have");
        }
        snapshot.files.push_back(shard);
      }
    }
    break;
  }
  if (snapshot.weights.empty()) {
    if (weights_not_cached) fetcher.throw_not_cached(commit, "the weights");
    throw_error("'", repo_id, "' at commit ", commit,
                " has no weights: none of model.safetensors, model.safetensors.index.json, "
                "pytorch_model.bin, pytorch_model.bin.index.json");
  }

  for (const char* name : kTokenizerFileNames) {
    const Lookup lookup = fetcher.fetch(commit, name).lookup;
    if (lookup == Lookup::kFound) snapshot.files.push_back(name);
    if (lookup == Lookup::kNotCached && !options.offline) {
      log_warn(name, " of '", repo_id, "' is not in the cache and the Hub could not be asked; ",
               "continuing without it");
    }
  }
  return snapshot;
}

std::string resolve_model(const std::string& repo_id, const HubOptions& options) {
  return download_model(repo_id, options).folder;
}

}  // namespace bertfit
