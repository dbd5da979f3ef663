// Hugging Face Hub names -> local snapshot folders, in the cache layout huggingface_hub uses
// (see hub/cache.h), following its rules for endpoints, tokens, offline mode, redirects and
// resumed downloads (docs/DESIGN.md, "Hub"). Knows files, not models: which files a model
// needs is decided here by name only; nothing is parsed but a weights index's file list.
//
//   HubOptions options = hub_options_from_env();
//   options.revision = "v1.0";                                    // branch, tag or commit
//   std::string dir = resolve_model("distilbert/distilbert-base-uncased", options);
//   // dir/config.json, dir/model.safetensors, dir/vocab.txt, ... (symlinks into the cache)
//
// Every failure a user, a server or the network can cause is an Error with a one-line message.
// The token is sent only to the endpoint's own origin (scheme, host and port), never to the host
// a large file is redirected to, and never appears in a message or a log line.
#pragma once

#include <string>
#include <vector>

namespace bertfit {

struct HubOptions {
  std::string endpoint = "https://huggingface.co";  // no trailing '/'
  std::string token;                                // empty: anonymous
  std::string cache_dir;  // the hub cache folder (holds models--org--name/)
  std::string revision = "main";
  bool offline = false;          // read the cache only; never touch the network
  bool progress = true;          // a throttled progress line on stderr for large files
  long metadata_timeout_s = 10;  // per HEAD request (HF_HUB_ETAG_TIMEOUT)
  long download_timeout_s =
      10;  // a download stalled this long is resumed (HF_HUB_DOWNLOAD_TIMEOUT)
};

// Options from the environment, as huggingface_hub reads it (constants.py, utils/_auth.py):
//   endpoint  HF_ENDPOINT, trailing '/' removed; default https://huggingface.co
//   home      HF_HOME, else $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface
//   cache_dir HF_HUB_CACHE, else HUGGINGFACE_HUB_CACHE, else {home}/hub
//   token     HF_TOKEN, else HUGGING_FACE_HUB_TOKEN, else the file HF_TOKEN_PATH (default
//             {home}/token); line breaks and surrounding spaces removed, empty means none
//   offline   HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE set to 1, ON, YES or TRUE (any case)
//   progress  off when HF_HUB_DISABLE_PROGRESS_BARS is true
//   timeouts  HF_HUB_ETAG_TIMEOUT, HF_HUB_DOWNLOAD_TIMEOUT (seconds)
// Throws Error for a malformed value (an endpoint that is not http(s), a timeout that is not a
// positive integer) or a token file that exists but cannot be read.
HubOptions hub_options_from_env();

// True when s has the form of a Hub repository id, "name" or "org/name" (huggingface_hub's
// validate_repo_id): each part 1+ characters of A-Z a-z 0-9 _ - . starting and ending with a
// letter, digit or '_'; no "--" or ".."; not ending in ".git"; at most 96 characters. A command
// treats a --model value as a repo id when it is not an existing folder and this holds.
bool looks_like_repo_id(const std::string& s);

// The files of one model at one commit, present in the cache.
struct ModelSnapshot {
  std::string folder;  // {cache}/models--org--name/snapshots/{commit}
  std::string commit;
  std::string weights;             // the weights file found (see download_model), or its index
  std::vector<std::string> files;  // every file fetched, relative to folder
};

// Makes sure the cache holds what a transformers model needs at options.revision, downloading
// what is missing, and returns where it is:
//   config.json (required: it fixes the commit; the other files are fetched at that commit);
//   the weights in the first form the repository has, in transformers' order: model.safetensors,
//   model.safetensors.index.json and its shards, pytorch_model.bin, pytorch_model.bin.index.json
//   and its shards;
//   vocab.txt, tokenizer.json, tokenizer_config.json, special_tokens_map.json when present.
// Offline (or when the Hub cannot be reached or refuses the request, as huggingface_hub falls
// back) it answers from the cache alone.
ModelSnapshot download_model(const std::string& repo_id, const HubOptions& options);

// download_model(...).folder.
std::string resolve_model(const std::string& repo_id, const HubOptions& options);

}  // namespace bertfit
