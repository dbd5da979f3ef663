// Unit tests without a server: repo id syntax, name checks, cache paths and links, URL helpers,
// options from the environment.
#include "hub/cache.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>

#include "base/error.h"
#include "hub/http.h"
#include "hub/hub.h"
#include "tests/util/temp_dir.h"

namespace bertfit::hub {
namespace {

namespace fs = std::filesystem;

const std::string kCommit(40, 'c');

using testing::TempDir;

// Sets (or unsets, with nullopt) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

void write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

TEST(HubNames, LooksLikeRepoId) {
  for (const char* id : {"bert-base-uncased", "distilbert/distilbert-base-uncased", "a/b", "x",
                         "org_1/model.v2", "google-bert/bert-base-cased"}) {
    EXPECT_TRUE(looks_like_repo_id(id)) << id;
  }
  for (const char* id :
       {"", "/abs/path", "./model", "../model", "a/b/c", "org/", "/name", "org--x/y", "a..b",
        "model.git", "-lead", "trail-", "org/.hidden", "has space", "a\\b", "~/models/x"}) {
    EXPECT_FALSE(looks_like_repo_id(id)) << id;
  }
  EXPECT_TRUE(looks_like_repo_id(std::string(96, 'a')));
  EXPECT_FALSE(looks_like_repo_id(std::string(97, 'a')));
}

TEST(HubNames, RepoPathsThatLeaveTheCacheAreRefused) {
  for (const char* ok : {"model.safetensors", "sub/model-00001-of-00002.safetensors", "a.b/c"}) {
    EXPECT_NO_THROW(check_repo_path(ok, "file name", "test")) << ok;
  }
  for (const char* bad : {"", "../../x", "/etc/passwd", "a/../../b", "a//b", "./a", "a/.", "..",
                          "a\\..\\b", "a\nb"}) {
    EXPECT_THROW(check_repo_path(bad, "file name", "test"), Error) << bad;
  }
  try {
    check_repo_path("../../x", "shard name", "model.safetensors.index.json of 'org/m'");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "refusing the shard name '../../x' from model.safetensors.index.json of "
                 "'org/m': '..' would leave the cache");
  }
}

TEST(HubNames, HashesAndEtags) {
  EXPECT_TRUE(is_commit_hash(kCommit));
  EXPECT_FALSE(is_commit_hash(std::string(40, 'C')));
  EXPECT_FALSE(is_commit_hash(std::string(39, 'c')));
  EXPECT_TRUE(is_sha256_hex(std::string(64, '0')));
  EXPECT_FALSE(is_sha256_hex(kCommit));
  EXPECT_TRUE(is_safe_etag("2c1f0d3e-1"));
  for (const char* bad : {"", ".", "..", "a/b", "../x", "a b", "\"x\""}) {
    EXPECT_FALSE(is_safe_etag(bad)) << bad;
  }
}

TEST(HubCache, LayoutMatchesHuggingfaceHub) {
  EXPECT_EQ(repo_folder_name("org/name"), "models--org--name");
  EXPECT_EQ(repo_folder_name("bert-base-uncased"), "models--bert-base-uncased");
  TempDir tmp;
  const RepoCache cache(tmp.path(), "org/name");
  const std::string folder = tmp.path() + "/models--org--name";
  EXPECT_EQ(cache.folder(), folder);
  EXPECT_EQ(cache.pointer_path(kCommit, "sub/f.bin"),
            folder + "/snapshots/" + kCommit + "/sub/f.bin");
  EXPECT_EQ(cache.blob_path("e1"), folder + "/blobs/e1");
  EXPECT_EQ(cache.lock_path("e1"), tmp.path() + "/.locks/models--org--name/e1.lock");
}

TEST(HubCache, RefsAreWrittenWithoutNewlineAndReadTolerantly) {
  TempDir tmp;
  const RepoCache cache(tmp.path(), "org/name");
  EXPECT_FALSE(cache.read_ref("main"));
  cache.write_ref("main", kCommit);
  const std::string ref = tmp.path() + "/models--org--name/refs/main";
  std::ifstream in(ref);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), kCommit);
  EXPECT_EQ(cache.read_ref("main"), kCommit);
  cache.write_ref(kCommit, kCommit);  // a commit names itself: no ref file
  EXPECT_FALSE(fs::exists(tmp.path() + "/models--org--name/refs/" + kCommit));
  cache.write_ref("refs/pr/1", kCommit);  // huggingface_hub nests such revisions the same way
  EXPECT_EQ(cache.read_ref("refs/pr/1"), kCommit);
  write(ref, kCommit + "\n");
  EXPECT_EQ(cache.read_ref("main"), kCommit);
  write(ref, "not a commit");
  EXPECT_FALSE(cache.read_ref("main"));
}

TEST(HubCache, SnapshotLinksAreRelativeAndMissingFilesMarked) {
  TempDir tmp;
  const RepoCache cache(tmp.path(), "org/name");
  write(cache.blob_path("e1"), "top");
  write(cache.blob_path("e2"), "nested");
  cache.link_snapshot(kCommit, "config.json", "e1");
  cache.link_snapshot(kCommit, "sub/dir/w.bin", "e2");
  EXPECT_EQ(fs::read_symlink(cache.pointer_path(kCommit, "config.json")), "../../blobs/e1");
  EXPECT_EQ(fs::read_symlink(cache.pointer_path(kCommit, "sub/dir/w.bin")), "../../../../blobs/e2");
  EXPECT_TRUE(cache.has_file(kCommit, "sub/dir/w.bin"));
  cache.link_snapshot(kCommit, "config.json", "e2");  // replaced in place
  EXPECT_EQ(fs::read_symlink(cache.pointer_path(kCommit, "config.json")), "../../blobs/e2");
  fs::remove(cache.blob_path("e2"));
  EXPECT_FALSE(cache.has_file(kCommit, "config.json"));  // a dangling link is not a file

  EXPECT_FALSE(cache.marked_missing(kCommit, "tokenizer.json"));
  cache.mark_missing(kCommit, "tokenizer.json");
  EXPECT_TRUE(cache.marked_missing(kCommit, "tokenizer.json"));
  EXPECT_EQ(
      fs::file_size(tmp.path() + "/models--org--name/.no_exist/" + kCommit + "/tokenizer.json"),
      0u);
}

TEST(HubHttp, UrlHelpers) {
  EXPECT_EQ(url_origin("https://huggingface.co/org/x"), "https://huggingface.co:443");
  EXPECT_EQ(url_origin("HTTP://Example.COM:80/a"), "http://example.com:80");
  EXPECT_EQ(url_origin("http://127.0.0.1:8080"), "http://127.0.0.1:8080");
  EXPECT_EQ(url_origin("file:///etc/passwd"), "");
  EXPECT_EQ(url_origin("/relative"), "");
  EXPECT_TRUE(is_relative_reference("/org/new/resolve/main/config.json"));
  EXPECT_TRUE(is_relative_reference("config.json"));
  EXPECT_FALSE(is_relative_reference("//cdn.example.com/x"));
  EXPECT_FALSE(is_relative_reference("https://cdn.example.com/x"));
  EXPECT_EQ(resolve_url("http://h:1/old/resolve/main/a.json", "/new/resolve/main/a.json"),
            "http://h:1/new/resolve/main/a.json");
  EXPECT_EQ(resolve_url("http://h:1/a", "https://cdn:2/b?sig=1"), "https://cdn:2/b?sig=1");
  EXPECT_EQ(url_quote("refs/pr/1", false), "refs%2Fpr%2F1");
  EXPECT_EQ(url_quote("sub dir/a+b.json", true), "sub%20dir/a%2Bb.json");
  EXPECT_EQ(url_quote("v1.0_x-y~z", false), "v1.0_x-y~z");
}

TEST(HubOptions, FromEnvironmentAsHuggingfaceHub) {
  TempDir tmp;
  ScopedEnv home("HOME", tmp.path());
  ScopedEnv xdg("XDG_CACHE_HOME", std::nullopt);
  ScopedEnv hf_home("HF_HOME", std::nullopt);
  ScopedEnv cache("HF_HUB_CACHE", std::nullopt);
  ScopedEnv legacy_cache("HUGGINGFACE_HUB_CACHE", std::nullopt);
  ScopedEnv token("HF_TOKEN", std::nullopt);
  ScopedEnv legacy_token("HUGGING_FACE_HUB_TOKEN", std::nullopt);
  ScopedEnv token_path("HF_TOKEN_PATH", std::nullopt);
  ScopedEnv endpoint("HF_ENDPOINT", std::nullopt);
  ScopedEnv offline("HF_HUB_OFFLINE", std::nullopt);
  ScopedEnv tf_offline("TRANSFORMERS_OFFLINE", std::nullopt);
  ScopedEnv etag_timeout("HF_HUB_ETAG_TIMEOUT", std::nullopt);
  ScopedEnv download_timeout("HF_HUB_DOWNLOAD_TIMEOUT", std::nullopt);
  ScopedEnv progress("HF_HUB_DISABLE_PROGRESS_BARS", std::nullopt);

  HubOptions o = hub_options_from_env();
  EXPECT_EQ(o.endpoint, "https://huggingface.co");
  EXPECT_EQ(o.cache_dir, tmp.path() + "/.cache/huggingface/hub");
  EXPECT_EQ(o.token, "");
  EXPECT_FALSE(o.offline);
  EXPECT_EQ(o.revision, "main");

  write(tmp.path() + "/.cache/huggingface/token", "  hf_from_file\r\n");
  EXPECT_EQ(hub_options_from_env().token, "hf_from_file");
  {
    ScopedEnv t("HF_TOKEN", "hf_from_env\n");
    EXPECT_EQ(hub_options_from_env().token, "hf_from_env");
  }
  {
    ScopedEnv h("HF_HOME", "~/hfhome");
    o = hub_options_from_env();
    EXPECT_EQ(o.cache_dir, tmp.path() + "/hfhome/hub");
    EXPECT_EQ(o.token, "");  // the token file follows HF_HOME
  }
  {
    ScopedEnv x("XDG_CACHE_HOME", tmp.path() + "/xdg");
    EXPECT_EQ(hub_options_from_env().cache_dir, tmp.path() + "/xdg/huggingface/hub");
  }
  {
    ScopedEnv h("HF_HOME", tmp.path() + "/home");
    ScopedEnv c("HF_HUB_CACHE", tmp.path() + "/elsewhere");
    EXPECT_EQ(hub_options_from_env().cache_dir, tmp.path() + "/elsewhere");
  }
  {
    ScopedEnv e("HF_ENDPOINT", "http://127.0.0.1:9/");
    EXPECT_EQ(hub_options_from_env().endpoint, "http://127.0.0.1:9");
  }
  {
    ScopedEnv e("HF_ENDPOINT", "ftp://mirror");
    EXPECT_THROW(hub_options_from_env(), Error);
  }
  for (const char* value : {"1", "ON", "yes", "True"}) {
    ScopedEnv off("HF_HUB_OFFLINE", value);
    EXPECT_TRUE(hub_options_from_env().offline) << value;
  }
  {
    ScopedEnv off("HF_HUB_OFFLINE", "0");
    EXPECT_FALSE(hub_options_from_env().offline);
  }
  {
    ScopedEnv off("TRANSFORMERS_OFFLINE", "1");
    EXPECT_TRUE(hub_options_from_env().offline);
  }
  {
    ScopedEnv t("HF_HUB_ETAG_TIMEOUT", "3");
    EXPECT_EQ(hub_options_from_env().metadata_timeout_s, 3);
  }
  {
    ScopedEnv t("HF_HUB_DOWNLOAD_TIMEOUT", "soon");
    EXPECT_THROW(hub_options_from_env(), Error);
  }
}

}  // namespace
}  // namespace bertfit::hub
