// The Hub client against testdata/hub_emulator.py on 127.0.0.1: downloads into the HF cache
// layout, large-file redirects (token kept from another origin), gated and missing repositories,
// revisions, resumed and corrupt transfers, offline mode, renamed repositories, hostile names.
#include "hub/hub.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "hub/fetch.h"
#include "hub/testdata/hub_emulator.h"
#include "tests/util/errors.h"
#include "tests/util/temp_dir.h"

namespace bertfit {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kMain(40, 'a');
const std::string kV1(40, 'b');
const std::string kToken = "hf_test_secret_token";

using testing::TempDir;

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write(const std::string& path, const std::string& data) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << data;
}

// Deterministic bytes of a given size (a stand-in for weights).
std::string bytes(size_t size, unsigned seed) {
  std::string s(size, '\0');
  unsigned x = seed * 2654435761u + 1;
  for (char& c : s) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>(x >> 24);
  }
  return s;
}

std::string sha256(const std::string& data, const TempDir& tmp) {
  const std::string path = tmp / "sha_input";
  write(path, data);
  std::string hex = hub::sha256_file_hex(path);
  fs::remove(path);
  return hex;
}

// A model repository's files at one commit.
using Files = std::map<std::string, std::string>;

Files tiny_model(unsigned seed) {
  return {
      {"config.json", "{\"model_type\": \"distilbert\", \"seed\": " + std::to_string(seed) + "}"},
      {"model.safetensors", bytes(20000, seed)},
      {"vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n"},
      {"tokenizer_config.json", "{\"do_lower_case\": true}"}};
}

// testdata/hub_emulator.py in a child process (hub_emulator.h), its files in tmp.
class Emulator : public testing::HubEmulator {
 public:
  Emulator(const TempDir& tmp, const json& config) : HubEmulator(tmp.path(), config) {}
};

// Writes each commit's files under tmp and returns the emulator's entry for the repository.
json repo(const TempDir& tmp, const std::string& name, const std::map<std::string, Files>& commits,
          json refs = json{{"main", kMain}}) {
  json entry = {{"refs", refs}, {"commits", json::object()}};
  for (const auto& [commit, files] : commits) {
    const std::string dir = tmp / ("repos/" + name + "/" + commit);
    for (const auto& [file, data] : files) write(dir + "/" + file, data);
    entry["commits"][commit] = dir;
  }
  return entry;
}

HubOptions options_for(const Emulator& hub, const TempDir& tmp) {
  HubOptions o;
  o.endpoint = hub.endpoint();
  o.cache_dir = tmp / "cache";
  o.progress = false;
  o.download_timeout_s = 5;
  return o;
}

using testing::error_of;

int count(const std::vector<json>& log, const std::string& server, const std::string& method) {
  int n = 0;
  for (const json& r : log) n += r["server"] == server && r["method"] == method;
  return n;
}

TEST(Hub, DownloadsIntoTheHuggingFaceCacheLayout) {
  TempDir tmp;
  const Files files = tiny_model(1);
  Emulator hub(tmp,
               {{"token", kToken}, {"repos", {{"org/tiny", repo(tmp, "tiny", {{kMain, files}})}}}});
  HubOptions o = options_for(hub, tmp);
  o.token = kToken;

  const ModelSnapshot s = download_model("org/tiny", o);
  const std::string folder = tmp / "cache/models--org--tiny";
  EXPECT_EQ(s.folder, folder + "/snapshots/" + kMain);
  EXPECT_EQ(s.commit, kMain);
  EXPECT_EQ(s.weights, "model.safetensors");
  EXPECT_EQ(s.files, (std::vector<std::string>{"config.json", "model.safetensors", "vocab.txt",
                                               "tokenizer_config.json"}));
  EXPECT_EQ(read(folder + "/refs/main"), kMain);  // no newline, as huggingface_hub writes it
  for (const auto& [name, data] : files) {
    const std::string pointer = s.folder + "/" + name;
    ASSERT_TRUE(fs::is_symlink(pointer)) << name;
    const fs::path target = fs::read_symlink(pointer);
    EXPECT_TRUE(target.is_relative()) << target;
    EXPECT_EQ(target.parent_path(), "../../blobs") << target;
    EXPECT_EQ(read(pointer), data) << name;
    EXPECT_TRUE(fs::exists(folder + "/blobs/" + target.filename().string()));
  }
  // A large file's blob is named by its sha256; its lock file sits under .locks/.
  const std::string sha = sha256(files.at("model.safetensors"), tmp);
  EXPECT_EQ(fs::read_symlink(s.folder + "/model.safetensors"), "../../blobs/" + sha);
  EXPECT_TRUE(fs::exists(tmp / ("cache/.locks/models--org--tiny/" + sha + ".lock")));
  // Files the repository lacks are recorded as empty .no_exist entries; once weights are found
  // the other forms are not asked for.
  for (const char* missing : {"tokenizer.json", "special_tokens_map.json"}) {
    EXPECT_EQ(fs::file_size(folder + "/.no_exist/" + kMain + "/" + missing), 0u) << missing;
  }
  EXPECT_FALSE(fs::exists(folder + "/.no_exist/" + kMain + "/pytorch_model.bin"));
  for (const auto& entry : fs::recursive_directory_iterator(folder)) {
    EXPECT_EQ(entry.path().string().find(".incomplete"), std::string::npos) << entry.path();
  }

  const std::vector<json> log = hub.requests();
  for (const json& r : log) {
    if (r["method"] == "HEAD") {
      EXPECT_EQ(r["accept_encoding"], "identity") << r;
    }
    if (r["server"] == "hub") {
      EXPECT_EQ(r["authorization"], "Bearer " + kToken) << r;
    }
    // The CDN is another origin (another port): it must never see the token.
    if (r["server"] == "cdn") {
      EXPECT_TRUE(r["authorization"].is_null()) << r;
    }
  }
  EXPECT_EQ(count(log, "cdn", "GET"), 1);
  // Later files are asked for by commit, so a moving branch cannot mix two commits.
  for (const json& r : log) {
    const std::string path = r["path"];
    if (path.find("/resolve/") != std::string::npos && !path.ends_with("/main/config.json")) {
      EXPECT_NE(path.find("/resolve/" + kMain + "/"), std::string::npos) << path;
    }
  }

  // Again: one HEAD for config.json (is main still at that commit?), nothing downloaded.
  hub.clear_log();
  EXPECT_EQ(resolve_model("org/tiny", o), s.folder);
  EXPECT_EQ(count(hub.requests(), "hub", "HEAD"), 1);
  EXPECT_EQ(count(hub.requests(), "hub", "GET") + count(hub.requests(), "cdn", "GET"), 0);
  // By commit hash: no request at all.
  hub.clear_log();
  o.revision = kMain;
  EXPECT_EQ(resolve_model("org/tiny", o), s.folder);
  EXPECT_TRUE(hub.requests().empty());
}

TEST(Hub, CdnOnTheSameOriginKeepsTheToken) {
  TempDir tmp;
  json r = repo(tmp, "same", {{kMain, tiny_model(2)}});
  r["cdn"] = "same";
  Emulator hub(tmp, {{"token", kToken}, {"repos", {{"org/same", r}}}});
  HubOptions o = options_for(hub, tmp);
  o.token = kToken;
  download_model("org/same", o);
  int cdn_gets = 0;
  for (const json& entry : hub.requests()) {
    if (std::string(entry["path"]).starts_with("/cdn/")) {
      ++cdn_gets;
      EXPECT_EQ(entry["server"], "hub");
      EXPECT_EQ(entry["authorization"], "Bearer " + kToken);  // same netloc: kept, as in HF
    }
  }
  EXPECT_EQ(cdn_gets, 1);
}

TEST(Hub, GatedRepositoryNeedsTheToken) {
  TempDir tmp;
  json r = repo(tmp, "gated", {{kMain, tiny_model(3)}});
  r["gated"] = true;
  Emulator hub(tmp, {{"token", kToken}, {"repos", {{"org/gated", r}}}});
  HubOptions o = options_for(hub, tmp);
  EXPECT_EQ(error_of([&] { download_model("org/gated", o); }),
            "'org/gated' is a gated repository (HTTP 401): accept its conditions at " +
                hub.endpoint() + "/org/gated and set HF_TOKEN");
  o.token = "hf_wrong";
  EXPECT_EQ(error_of([&] { download_model("org/gated", o); }),
            "your Hub token has no access to the gated repository 'org/gated' (HTTP 403): request "
            "access at " +
                hub.endpoint() + "/org/gated");
  o.token = kToken;
  EXPECT_EQ(download_model("org/gated", o).weights, "model.safetensors");
  // The token is sent, never shown: no message quotes it.
  o.token = "hf_wrong";
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(error_of([&] { download_model("org/gated", o); }).find("hf_wrong"), std::string::npos);
  EXPECT_EQ(::testing::internal::GetCapturedStderr().find("hf_wrong"), std::string::npos);
  // Cached now: without the token huggingface_hub falls back to the cache, with a warning.
  o.token.clear();
  EXPECT_EQ(download_model("org/gated", o).commit, kMain);
}

TEST(Hub, MissingRepositoryRevisionAndConfig) {
  TempDir tmp;
  Files no_config = tiny_model(4);
  no_config.erase("config.json");
  Emulator hub(tmp, {{"repos",
                      {{"org/tiny", repo(tmp, "tiny", {{kMain, tiny_model(4)}})},
                       {"org/noconfig", repo(tmp, "noconfig", {{kMain, no_config}})}}}});
  HubOptions o = options_for(hub, tmp);
  EXPECT_EQ(error_of([&] { download_model("org/absent", o); }),
            "repository 'org/absent' not found at " + hub.endpoint() +
                " (HTTP 404); check the name, or set HF_TOKEN if it is private");
  o.token = kToken;
  EXPECT_EQ(error_of([&] { download_model("org/absent", o); }),
            "repository 'org/absent' not found at " + hub.endpoint() +
                ", or your Hub token cannot access it (HTTP 404)");
  o.revision = "v9";
  EXPECT_EQ(error_of([&] { download_model("org/tiny", o); }),
            "revision 'v9' not found in 'org/tiny' at " + hub.endpoint() +
                " (HTTP 404): give a branch, a tag or a commit hash");
  o.revision = "main";
  EXPECT_EQ(error_of([&] { download_model("org/noconfig", o); }),
            "'org/noconfig' at revision 'main' has no config.json: it is not a transformers model");
  EXPECT_EQ(error_of([&] { download_model("../etc", o); }),
            "'../etc' is not a Hub repository id (name or org/name)");
  o.revision = "../../x";
  EXPECT_EQ(error_of([&] { download_model("org/tiny", o); }),
            "'../../x' is not a valid revision: give a branch, a tag or a commit hash");
}

TEST(Hub, RevisionsByBranchTagAndCommit) {
  TempDir tmp;
  const Files main_files = tiny_model(5), v1_files = tiny_model(6);
  Emulator hub(tmp, {{"repos",
                      {{"org/rev", repo(tmp, "rev", {{kMain, main_files}, {kV1, v1_files}},
                                        {{"main", kMain}, {"v1", kV1}})}}}});
  HubOptions o = options_for(hub, tmp);
  const std::string folder = tmp / "cache/models--org--rev";
  o.revision = "v1";
  const ModelSnapshot tag = download_model("org/rev", o);
  EXPECT_EQ(tag.commit, kV1);
  EXPECT_EQ(read(folder + "/refs/v1"), kV1);
  EXPECT_EQ(read(tag.folder + "/model.safetensors"), v1_files.at("model.safetensors"));
  o.revision = kMain;
  const ModelSnapshot by_commit = download_model("org/rev", o);
  EXPECT_EQ(by_commit.folder, folder + "/snapshots/" + kMain);
  EXPECT_EQ(read(by_commit.folder + "/config.json"), main_files.at("config.json"));
  EXPECT_FALSE(fs::exists(folder + "/refs/" + kMain));  // a commit needs no ref
  EXPECT_FALSE(fs::exists(folder + "/refs/main"));
}

TEST(Hub, CutTransferResumesWithRange) {
  TempDir tmp;
  json r = repo(tmp, "cut", {{kMain, tiny_model(7)}});
  r["cut_once"] = {{"model.safetensors", 7000}};
  Emulator hub(tmp, {{"repos", {{"org/cut", r}}}});
  const ModelSnapshot s = download_model("org/cut", options_for(hub, tmp));
  EXPECT_EQ(read(s.folder + "/model.safetensors"), tiny_model(7).at("model.safetensors"));
  std::vector<json> gets;
  for (const json& entry : hub.requests()) {
    if (entry["server"] == "cdn") gets.push_back(entry);
  }
  ASSERT_EQ(gets.size(), 2u);
  EXPECT_TRUE(gets[0]["range"].is_null());
  EXPECT_EQ(gets[1]["range"], "bytes=7000-");
}

TEST(Hub, LeftoverIncompleteFileIsResumed) {
  TempDir tmp;
  const Files files = tiny_model(8);
  Emulator hub(tmp, {{"repos", {{"org/left", repo(tmp, "left", {{kMain, files}})}}}});
  const std::string& weights = files.at("model.safetensors");
  const std::string sha = sha256(weights, tmp);
  write(tmp / ("cache/models--org--left/blobs/" + sha + ".incomplete"), weights.substr(0, 12345));
  const ModelSnapshot s = download_model("org/left", options_for(hub, tmp));
  EXPECT_EQ(read(s.folder + "/model.safetensors"), weights);
  for (const json& entry : hub.requests()) {
    if (entry["server"] == "cdn") {
      EXPECT_EQ(entry["range"], "bytes=12345-");
    }
  }
}

TEST(Hub, CorruptDownloadIsRemovedAndLeavesNoSnapshotEntry) {
  TempDir tmp;
  const Files files = tiny_model(9);
  json r = repo(tmp, "bad", {{kMain, files}});
  r["corrupt"] = {"model.safetensors"};
  Emulator hub(tmp, {{"repos", {{"org/bad", r}}}});
  const std::string sha = sha256(files.at("model.safetensors"), tmp);
  const std::string error = error_of([&] { download_model("org/bad", options_for(hub, tmp)); });
  EXPECT_NE(error.find("org/bad/model.safetensors is corrupt: its sha256 is "), std::string::npos)
      << error;
  EXPECT_NE(error.find("but the Hub's etag is " + sha), std::string::npos) << error;
  const std::string folder = tmp / "cache/models--org--bad";
  EXPECT_FALSE(fs::exists(folder + "/snapshots/" + kMain + "/model.safetensors"));
  EXPECT_FALSE(fs::exists(folder + "/blobs/" + sha));
  EXPECT_FALSE(fs::exists(folder + "/blobs/" + sha + ".incomplete"));
}

TEST(Hub, OfflineReadsOnlyTheCache) {
  TempDir tmp;
  Emulator hub(tmp, {{"repos", {{"org/tiny", repo(tmp, "tiny", {{kMain, tiny_model(10)}})}}}});
  HubOptions o = options_for(hub, tmp);
  o.offline = true;
  EXPECT_EQ(error_of([&] { download_model("org/tiny", o); }),
            "offline mode (HF_HUB_OFFLINE) and the cache " + o.cache_dir +
                " has no config.json of 'org/tiny' at revision 'main'; run once with network "
                "access to download it");
  o.offline = false;
  const ModelSnapshot online = download_model("org/tiny", o);
  hub.clear_log();
  o.offline = true;
  const ModelSnapshot offline = download_model("org/tiny", o);
  EXPECT_EQ(offline.folder, online.folder);
  EXPECT_EQ(offline.files, online.files);
  EXPECT_TRUE(hub.requests().empty());
  o.revision = "v1";
  EXPECT_NE(error_of([&] {
              download_model("org/tiny", o);
            }).find("has no config.json of 'org/tiny' at revision 'v1'"),
            std::string::npos);
}

TEST(Hub, UnreachableHubFallsBackToTheCacheOrSaysWhatToDo) {
  TempDir tmp;
  HubOptions o;
  o.endpoint = "http://127.0.0.1:1";  // nothing listens there
  o.cache_dir = tmp / "cache";
  o.progress = false;
  const std::string error = error_of([&] { download_model("org/tiny", o); });
  EXPECT_TRUE(error.starts_with("cannot reach the Hub at http://127.0.0.1:1 (")) << error;
  EXPECT_TRUE(error.ends_with(") and the cache " + o.cache_dir +
                              " has no config.json of 'org/tiny' at revision 'main'; check the "
                              "network (with HF_HUB_OFFLINE=1 only cached models are used)"))
      << error;
  {
    Emulator hub(tmp, {{"repos", {{"org/tiny", repo(tmp, "tiny", {{kMain, tiny_model(11)}})}}}});
    HubOptions online = options_for(hub, tmp);
    download_model("org/tiny", online);
  }
  EXPECT_EQ(download_model("org/tiny", o).commit, kMain);
}

TEST(Hub, RenamedRepositoryFollowsTheRelativeRedirect) {
  TempDir tmp;
  Emulator hub(tmp, {{"token", kToken},
                     {"repos",
                      {{"org/new", repo(tmp, "new", {{kMain, tiny_model(12)}})},
                       {"org/old", {{"moved_to", "org/new"}}}}}});
  HubOptions o = options_for(hub, tmp);
  o.token = kToken;
  const ModelSnapshot s = download_model("org/old", o);
  EXPECT_EQ(s.folder, tmp / ("cache/models--org--old/snapshots/" + kMain));  // as HF: asked name
  EXPECT_EQ(read(s.folder + "/vocab.txt"), tiny_model(12).at("vocab.txt"));
  bool followed = false;
  for (const json& r : hub.requests()) {
    if (r["method"] == "GET" && r["server"] == "hub") {
      EXPECT_TRUE(std::string(r["path"]).starts_with("/org/new/")) << r;
      EXPECT_EQ(r["authorization"], "Bearer " + kToken);  // same host: the token follows
      followed = true;
    }
  }
  EXPECT_TRUE(followed);
}

TEST(Hub, ShardedWeightsAndNamesThatLeaveTheCache) {
  TempDir tmp;
  Files sharded = tiny_model(13);
  sharded.erase("model.safetensors");
  sharded["model.safetensors.index.json"] =
      R"({"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors",
          "b": "model-00002-of-00002.safetensors", "c": "model-00001-of-00002.safetensors"}})";
  sharded["model-00001-of-00002.safetensors"] = bytes(3000, 1);
  sharded["model-00002-of-00002.safetensors"] = bytes(500, 2);
  Files hostile = tiny_model(14);
  hostile.erase("model.safetensors");
  hostile["model.safetensors.index.json"] = R"({"weight_map": {"a": "../../x"}})";
  Files absolute = hostile;
  absolute["model.safetensors.index.json"] = R"({"weight_map": {"a": "/etc/passwd"}})";
  Emulator hub(tmp, {{"repos",
                      {{"org/sharded", repo(tmp, "sharded", {{kMain, sharded}})},
                       {"org/hostile", repo(tmp, "hostile", {{kMain, hostile}})},
                       {"org/absolute", repo(tmp, "absolute", {{kMain, absolute}})}}}});
  HubOptions o = options_for(hub, tmp);
  const ModelSnapshot s = download_model("org/sharded", o);
  EXPECT_EQ(s.weights, "model.safetensors.index.json");
  EXPECT_EQ(read(s.folder + "/model-00001-of-00002.safetensors"), bytes(3000, 1));
  EXPECT_EQ(read(s.folder + "/model-00002-of-00002.safetensors"), bytes(500, 2));

  EXPECT_EQ(error_of([&] { download_model("org/hostile", o); }),
            "refusing the shard name '../../x' from model.safetensors.index.json of "
            "'org/hostile': '..' would leave the cache");
  EXPECT_EQ(error_of([&] { download_model("org/absolute", o); }),
            "refusing the shard name '/etc/passwd' from model.safetensors.index.json of "
            "'org/absolute': an absolute path would leave the cache");
  EXPECT_FALSE(fs::exists(tmp / "cache/models--org--hostile/x"));
  EXPECT_FALSE(fs::exists(tmp / "cache/x"));
  for (const json& r : hub.requests()) {
    EXPECT_EQ(std::string(r["path"]).find(".."), std::string::npos) << r;
  }
}

TEST(Hub, PytorchWeightsWhenThereIsNoSafetensors) {
  TempDir tmp;
  Files files = tiny_model(15);
  files.erase("model.safetensors");
  files["pytorch_model.bin"] = bytes(5000, 3);
  Emulator hub(tmp, {{"repos", {{"org/pt", repo(tmp, "pt", {{kMain, files}})}}}});
  const ModelSnapshot s = download_model("org/pt", options_for(hub, tmp));
  EXPECT_EQ(s.weights, "pytorch_model.bin");
  EXPECT_TRUE(
      fs::exists(tmp / ("cache/models--org--pt/.no_exist/" + kMain + "/model.safetensors")));
  EXPECT_FALSE(fs::exists(
      tmp / ("cache/models--org--pt/.no_exist/" + kMain + "/pytorch_model.bin.index.json")));
}

TEST(Hub, ReadsACacheWrittenByHuggingfaceHub) {
  // The layout hf_hub_download leaves (file_download.py): blobs by etag, relative links,
  // refs/main without a newline, .no_exist markers; bertfit uses it as it is, offline or online.
  TempDir tmp;
  const Files files = tiny_model(16);
  const std::string folder = tmp / "cache/models--org--hf";
  const std::string config_etag(40, 'e');
  const std::string weights_etag = sha256(files.at("model.safetensors"), tmp);
  write(folder + "/blobs/" + config_etag, files.at("config.json"));
  write(folder + "/blobs/" + weights_etag, files.at("model.safetensors"));
  const std::string snapshot = folder + "/snapshots/" + kMain;
  fs::create_directories(snapshot);
  fs::create_symlink("../../blobs/" + config_etag, snapshot + "/config.json");
  fs::create_symlink("../../blobs/" + weights_etag, snapshot + "/model.safetensors");
  write(folder + "/refs/main", kMain);
  write(folder + "/.no_exist/" + kMain + "/vocab.txt", "");

  Emulator hub(tmp, {{"repos", {{"org/hf", repo(tmp, "hf", {{kMain, files}})}}}});
  HubOptions o = options_for(hub, tmp);
  o.offline = true;
  ModelSnapshot s = download_model("org/hf", o);
  EXPECT_EQ(s.folder, snapshot);
  EXPECT_EQ(s.files, (std::vector<std::string>{"config.json", "model.safetensors"}));
  EXPECT_TRUE(hub.requests().empty());
  o.offline = false;
  s = download_model("org/hf", o);
  EXPECT_EQ(s.files, (std::vector<std::string>{"config.json", "model.safetensors",
                                               "tokenizer_config.json"}));
  // config.json's HEAD, then only what the cache did not answer; vocab.txt stays "missing".
  for (const json& r : hub.requests()) {
    const std::string path = r["path"];
    EXPECT_EQ(path.find("vocab.txt"), std::string::npos) << path;
    EXPECT_EQ(path.find("model.safetensors"), std::string::npos) << path;
    if (r["method"] == "GET") {
      EXPECT_NE(path.find("tokenizer_config.json"), std::string::npos);
    }
  }
}

TEST(Hub, DiskFullIsAClearError) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full to stand in for a full disk";
  TempDir tmp;
  const Files files = tiny_model(17);
  Emulator hub(tmp, {{"repos", {{"org/full", repo(tmp, "full", {{kMain, files}})}}}});
  // Writes to /dev/full fail with ENOSPC: stand it in for the download's temporary file.
  const std::string sha = sha256(files.at("model.safetensors"), tmp);
  const std::string incomplete = tmp / ("cache/models--org--full/blobs/" + sha + ".incomplete");
  fs::create_directories(fs::path(incomplete).parent_path());
  fs::create_symlink("/dev/full", incomplete);
  const std::string error = error_of([&] { download_model("org/full", options_for(hub, tmp)); });
  EXPECT_TRUE(error.starts_with("disk full writing " + incomplete +
                                " (0 of 20000 bytes): free "
                                "space or set HF_HUB_CACHE to a larger disk"))
      << error;
  EXPECT_FALSE(
      fs::exists(tmp / ("cache/models--org--full/snapshots/" + kMain + "/model.safetensors")));
}

TEST(Hub, CacheIsWrittenWithTheUsersUmask) {
  TempDir tmp;
  Emulator hub(tmp, {{"repos", {{"org/tiny", repo(tmp, "tiny", {{kMain, tiny_model(18)}})}}}});
  const mode_t old = ::umask(027);
  const ModelSnapshot s = download_model("org/tiny", options_for(hub, tmp));
  ::umask(old);
  const auto mode = [](const std::string& path) {
    struct stat st {};
    EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
    return st.st_mode & 0777;
  };
  EXPECT_EQ(mode(s.folder + "/model.safetensors"), 0640u);  // stat follows the link to the blob
  EXPECT_EQ(mode(s.folder + "/config.json"), 0640u);
  EXPECT_EQ(mode(s.folder), 0750u);
  EXPECT_EQ(mode(tmp / "cache/models--org--tiny/refs/main"), 0640u);
}

TEST(Hub, ProgressLineForLargeFiles) {
  TempDir tmp;
  Files files = tiny_model(19);
  files["model.safetensors"] = bytes(11 << 20, 4);
  Emulator hub(tmp, {{"repos", {{"org/big", repo(tmp, "big", {{kMain, files}})}}}});
  HubOptions o = options_for(hub, tmp);
  o.progress = true;
  ::testing::internal::CaptureStderr();
  download_model("org/big", o);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("downloading org/big/model.safetensors: 11.5 / 11.5 MB (100%)"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("config.json"), std::string::npos) << err;  // small files: no line
}

}  // namespace
}  // namespace bertfit
