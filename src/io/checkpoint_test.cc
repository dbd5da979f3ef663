// Sharded checkpoints (transformers' index.json + shard files): tensors found across shards in
// place, and every inconsistency of an index refused with the index, the tensor and the files
// named: shard names that leave the folder or name nothing, a tensor its shard lacks, a tensor
// in two shards, a malformed index. Written with safetensors shards, so no PyTorch is needed.
#include "io/checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>

#include "base/error.h"
#include "base/file.h"
#include "tests/util/errors.h"

namespace bertfit {
namespace {

namespace fs = std::filesystem;

using testing::error_of;

class ShardedCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() /
            cat("bertfit_checkpoint_", ::getpid(), "_",
                ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // Shard 1: a (2 floats), b (bf16 1.5); shard 2: c (3 floats), ids (I64).
    const float a[] = {1, 2}, c[] = {3, 4, 5};
    const std::uint16_t b = 0x3fc0;  // 1.5 in bf16
    const std::int64_t ids[] = {0, 1};
    write_safetensors(path("s-1.safetensors"), {{"a", SafetensorsDType::kF32, Shape{2}, a},
                                                {"b", SafetensorsDType::kBF16, Shape{}, &b}});
    write_safetensors(path("s-2.safetensors"), {{"c", SafetensorsDType::kF32, Shape{3}, c},
                                                {"ids", SafetensorsDType::kI64, Shape{2}, ids}});
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  // Writes index.json with the given weight_map (a JSON object's text) and opens it.
  Checkpoint open(const std::string& weight_map) {
    write_file_atomic(path("index.json"),
                      "{\"metadata\": {\"total_size\": 42}, \"weight_map\": " + weight_map + "}");
    return Checkpoint::open_sharded(path("index.json"), CheckpointFormat::kSafetensors);
  }
  std::string error(const std::string& weight_map) {
    return error_of([&] { open(weight_map); });
  }
  static constexpr const char* kGood =
      R"({"a": "s-1.safetensors", "b": "s-1.safetensors", "c": "s-2.safetensors",
          "ids": "s-2.safetensors"})";

  std::string dir_;
};

TEST_F(ShardedCheckpoint, FindsEveryTensorInItsShard) {
  Checkpoint c = open(kGood);
  EXPECT_EQ(c.path(), path("index.json"));
  ASSERT_EQ(c.tensors().size(), 4u);
  EXPECT_EQ(c.tensors()[0].name, "a");  // shards in name order, tensors in file order
  EXPECT_EQ(c.tensors()[2].name, "c");
  EXPECT_EQ(c.find("c")->file, path("s-2.safetensors"));
  float v[3];
  read_f32(*c.find("c"), v);
  EXPECT_EQ(v[2], 5.f);
  read_f32(*c.find("b"), v);
  EXPECT_EQ(v[0], 1.5f);
  EXPECT_EQ(c.find("ids")->dtype, SafetensorsDType::kI64);
  EXPECT_EQ(c.find("nope"), nullptr);
  // A moved Checkpoint keeps its files mapped and its tensors valid.
  Checkpoint moved = std::move(c);
  read_f32(*moved.find("a"), v);
  EXPECT_EQ(v[1], 2.f);
}

TEST_F(ShardedCheckpoint, TensorsItsIndexDoesNotListStillLoad) {
  // transformers loads every tensor of each shard it opens; so does bertfit. A shard the index
  // never names is not opened.
  const float z = 9;
  write_safetensors(path("s-3.safetensors"), {{"z", SafetensorsDType::kF32, Shape{}, &z}});
  Checkpoint c = open(R"({"a": "s-1.safetensors", "c": "s-2.safetensors"})");
  EXPECT_NE(c.find("b"), nullptr);
  EXPECT_NE(c.find("ids"), nullptr);
  EXPECT_EQ(c.find("z"), nullptr);
}

TEST_F(ShardedCheckpoint, ATensorItsShardLacksOrTwoShardsHoldIsNamed) {
  std::string msg = error(R"({"a": "s-2.safetensors", "b": "s-1.safetensors"})");
  EXPECT_NE(msg.find(path("index.json") + ": maps tensor 'a' to shard " + path("s-2.safetensors") +
                     ", but it is in shard " + path("s-1.safetensors")),
            std::string::npos)
      << msg;
  msg = error(R"({"a": "s-1.safetensors", "zz": "s-2.safetensors"})");
  EXPECT_NE(
      msg.find("maps tensor 'zz' to shard " + path("s-2.safetensors") + ", which does not hold it"),
      std::string::npos)
      << msg;
  const float a[] = {7, 8};
  write_safetensors(path("s-3.safetensors"), {{"a", SafetensorsDType::kF32, Shape{2}, a}});
  msg = error(R"({"a": "s-1.safetensors", "c": "s-2.safetensors", "x": "s-3.safetensors"})");
  EXPECT_NE(msg.find("tensor 'a' is in two shards: " + path("s-1.safetensors") + " and " +
                     path("s-3.safetensors")),
            std::string::npos)
      << msg;
}

TEST_F(ShardedCheckpoint, ShardNamesStayInTheFolderAndNameFiles) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"a": "../s-1.safetensors"})", "shard '../s-1.safetensors' (of tensor 'a'): has a '..'"},
      {R"({"a": "sub/../../x"})", "has a '..' component"},
      {R"({"a": ".."})", "has a '..' component"},
      {R"({"a": "/etc/passwd"})", "shard '/etc/passwd' (of tensor 'a'): is an absolute path"},
      {R"({"a": ""})", "tensor 'a' has an empty shard name"},
      {R"({"a": "a\u0000b"})", "the shard name of tensor 'a' holds a NUL character"},
      {R"({"a": "s-9.safetensors"})", "shard 's-9.safetensors' (of tensor 'a') is not a file in"},
      {R"({"a": "."})", "shard '.' (of tensor 'a') is not a file in"},
      {R"({"a": 3})", "weight_map entry 'a' must be a file name string"},
      {R"({})", "\"weight_map\" is empty"},
      {R"([])", "no \"weight_map\" object"},
  };
  for (const auto& [map, expected] : cases) {
    std::string msg = error(map);
    EXPECT_NE(msg.find(expected), std::string::npos) << map << " -> " << msg;
    EXPECT_NE(msg.find(path("index.json")), std::string::npos) << msg;
  }
  // A dotted name that stays inside is fine, and so is a subfolder.
  fs::create_directories(path("sub"));
  fs::copy_file(path("s-2.safetensors"), path("sub/s-2..x.safetensors"));
  Checkpoint c = open(R"({"a": "./s-1.safetensors", "c": "sub/s-2..x.safetensors"})");
  EXPECT_EQ(c.find("c")->file, path("sub/s-2..x.safetensors"));
}

TEST_F(ShardedCheckpoint, MalformedIndexFiles) {
  write_file_atomic(path("index.json"), "{\"weight_map\": ");
  std::string msg = error_of(
      [&] { Checkpoint::open_sharded(path("index.json"), CheckpointFormat::kSafetensors); });
  EXPECT_NE(msg.find(path("index.json")), std::string::npos) << msg;
  write_file_atomic(path("index.json"), "[1, 2]");
  msg = error_of(
      [&] { Checkpoint::open_sharded(path("index.json"), CheckpointFormat::kSafetensors); });
  EXPECT_NE(msg.find("must be a JSON object"), std::string::npos) << msg;
  // A shard of the other format is reported by that format's reader, naming the shard.
  write_file_atomic(path("index.json"), R"({"weight_map": {"a": "s-1.safetensors"}})");
  msg = error_of([&] { Checkpoint::open_sharded(path("index.json"), CheckpointFormat::kPytorch); });
  EXPECT_NE(msg.find(path("s-1.safetensors") + ": not a PyTorch checkpoint"), std::string::npos)
      << msg;
}

}  // namespace
}  // namespace bertfit
