// The PyTorch checkpoint reader: checkpoints written by torch.save itself (fp32, fp16, bf16,
// shared storages, a parameter, pickle protocol 4, zip64 records with data descriptors) read
// bit for bit as PyTorch wrote them; what must be refused (a pickle that would run os.system, a
// user class, a nested training checkpoint, a non-contiguous view, the legacy format, big-endian
// data, compressed entries) is, with a message naming the file and the culprit; and hand-made
// archives and pickles reach every refusal of the zip reader and the pickle machine without
// PyTorch, and no truncation of an archive crashes.
#include "io/pytorch.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file.h"
#include "io/checkpoint.h"
#include "tests/util/errors.h"
#include "tests/util/torch_fixtures.h"

namespace bertfit {
namespace {

namespace fs = std::filesystem;
using namespace std::string_literals;

using testing::error_of;

std::span<const std::byte> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

std::string from_hex(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

std::string bytes_of(std::span<const std::byte> b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

// ---- Checkpoints written by torch.save (tests/fixtures/make_torch_checkpoints.py io).

class TorchWritten : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (testing::python_with_torch().empty()) return;
    dir_ = (fs::temp_directory_path() / cat("bertfit_pytorch_test_", ::getpid())).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    made_ = testing::make_torch_checkpoints("io " + dir_);
  }
  static void TearDownTestSuite() {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  void SetUp() override {
    if (testing::python_with_torch().empty()) GTEST_SKIP() << testing::kNoTorch;
    ASSERT_TRUE(made_) << "make_torch_checkpoints.py io failed (its error is above)";
  }
  static std::string path(const std::string& name) { return dir_ + "/" + name; }

  // Every tensor of `file` as the manifest written beside it says: names in order, dtype,
  // shape, the raw bytes, and for floating tensors the fp32 values torch's .float() gives.
  static void expect_as_written(const std::string& file, const std::string& manifest) {
    PytorchFile f = PytorchFile::open(path(file));
    auto want = nlohmann::json::parse(read_file(path(manifest)))["tensors"];
    ASSERT_EQ(f.tensors().size(), want.size()) << file;
    for (std::size_t i = 0; i < want.size(); ++i) {
      const CheckpointTensor& t = f.tensors()[i];
      const auto& w = want[i];
      SCOPED_TRACE(file + ": " + t.name);
      EXPECT_EQ(t.name, w["name"].get<std::string>());
      EXPECT_EQ(safetensors_dtype_name(t.dtype), w["dtype"].get<std::string>());
      EXPECT_EQ(t.shape.dims, w["shape"].get<std::vector<std::int64_t>>());
      EXPECT_EQ(t.file, path(file));
      EXPECT_EQ(bytes_of(t.bytes), from_hex(w["raw"].get<std::string>()));
      if (w.contains("f32")) {
        ASSERT_TRUE(is_floating(t.dtype));
        std::string got(t.shape.numel() * 4, '\0');
        read_f32(t, reinterpret_cast<float*>(got.data()));
        EXPECT_EQ(got, from_hex(w["f32"].get<std::string>()));  // bit for bit, NaN included
      } else {
        EXPECT_FALSE(is_floating(t.dtype));
        float unused;
        EXPECT_NE(error_of([&] { read_f32(t, &unused); }).find("'" + t.name + "'"),
                  std::string::npos);
      }
    }
  }

  static std::string dir_;
  static bool made_;
};
std::string TorchWritten::dir_;
bool TorchWritten::made_ = false;

TEST_F(TorchWritten, StateDictsReadBitForBitInEveryDtype) {
  expect_as_written("f32.bin", "f32.json");
  expect_as_written("f16.bin", "f16.json");
  expect_as_written("bf16.bin", "bf16.json");
  expect_as_written("param.bin", "param.json");  // nn.Parameter: _rebuild_parameter
  expect_as_written("proto4.bin", "f32.json");   // SHORT_BINUNICODE, MEMOIZE, FRAME
  expect_as_written("zip64.bin", "f32.json");    // zip64 fields, data descriptors, byteorder
}

TEST_F(TorchWritten, SharedStoragesAreViewsOfOneRecord) {
  expect_as_written("shared.bin", "shared.json");
  PytorchFile f = PytorchFile::open(path("shared.bin"));
  auto data = [&](const char* name) {
    for (const auto& t : f.tensors()) {
      if (t.name == name) return t.bytes.data();
    }
    ADD_FAILURE() << name;
    return static_cast<const std::byte*>(nullptr);
  };
  // Not copies: the tensors point into the one mapped storage record, at their offsets.
  EXPECT_EQ(data("tied"), data("base"));
  EXPECT_EQ(data("flat"), data("base"));
  EXPECT_EQ(data("rows"), data("base") + 2 * 4 * 4);
  EXPECT_EQ(data("last_row"), data("base") + 5 * 4 * 4);
}

TEST_F(TorchWritten, ACheckpointOfEitherFormatOpensAsACheckpoint) {
  Checkpoint c = Checkpoint::open(path("f16.bin"), CheckpointFormat::kPytorch);
  EXPECT_EQ(c.path(), path("f16.bin"));
  const CheckpointTensor* t = c.find("scalar");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->shape, Shape{});
  float v = 0;
  read_f32(*t, &v);
  EXPECT_EQ(v, 2.5f);
  EXPECT_EQ(c.find("embeddings.position_ids")->dtype, SafetensorsDType::kI64);
}

TEST_F(TorchWritten, AGlobalThatWouldRunCodeIsRefusedAndNeverRun) {
  std::string msg = error_of([&] { PytorchFile::open(path("evil.bin")); });
  EXPECT_NE(msg.find(path("evil.bin")), std::string::npos) << msg;
  // os.system pickles as posix.system on Linux (its __module__).
  EXPECT_NE(msg.find("'posix.system'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("weights_only=True"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(path("pwned")));

  msg = error_of([&] { PytorchFile::open(path("user_class.bin")); });
  EXPECT_NE(msg.find("'__main__.UserThing'"), std::string::npos) << msg;
}

TEST_F(TorchWritten, WhatIsNotAStateDictOfContiguousTensorsIsRefused) {
  std::string msg = error_of([&] { PytorchFile::open(path("nested.bin")); });
  EXPECT_NE(msg.find("entry 'model' is a dict, not a tensor"), std::string::npos) << msg;
  msg = error_of([&] { PytorchFile::open(path("noncontig.bin")); });
  EXPECT_NE(msg.find("tensor 't'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("non-contiguous view (size [4, 6], stride [1, 4])"), std::string::npos) << msg;
}

TEST_F(TorchWritten, LegacyBigEndianAndCompressedArchivesAreRefused) {
  std::string msg = error_of([&] { PytorchFile::open(path("legacy.bin")); });
  EXPECT_NE(msg.find(path("legacy.bin")), std::string::npos) << msg;
  EXPECT_NE(msg.find("legacy serialization format"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Re-save it"), std::string::npos) << msg;
  msg = error_of([&] { PytorchFile::open(path("bigendian.bin")); });
  EXPECT_NE(msg.find("big-endian"), std::string::npos) << msg;
  msg = error_of([&] { PytorchFile::open(path("compressed.bin")); });
  EXPECT_NE(msg.find("zip entry 'f32/data.pkl': is compressed (method 8)"), std::string::npos)
      << msg;
}

TEST_F(TorchWritten, EveryTruncationIsAnError) {
  for (const char* name : {"f32.bin", "zip64.bin"}) {
    const std::string whole = read_file(path(name));
    for (std::size_t n = 0; n < whole.size(); ++n) {
      std::string part = whole.substr(0, n);
      EXPECT_NE(error_of([&] { parse_pytorch_checkpoint(as_bytes(part), name); }), "")
          << name << " cut at " << n;
    }
  }
}

// ---- Hand-made archives and pickles: the refusals PyTorch never writes, without PyTorch.

void put(std::string& s, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// A stored zip with 32-bit records and sizes in the local headers, as a plain writer makes it.
std::string zip_of(const std::vector<std::pair<std::string, std::string>>& records) {
  std::string out, central;
  for (const auto& [name, data] : records) {
    const std::size_t offset = out.size();
    put(out, 0x04034b50, 4);
    put(out, 20, 2), put(out, 0, 2), put(out, 0, 2), put(out, 0, 4), put(out, 0, 4);
    put(out, data.size(), 4), put(out, data.size(), 4), put(out, name.size(), 2), put(out, 0, 2);
    out += name + data;
    put(central, 0x02014b50, 4);
    put(central, 20, 2), put(central, 20, 2), put(central, 0, 2), put(central, 0, 2);
    put(central, 0, 4), put(central, 0, 4), put(central, data.size(), 4);
    put(central, data.size(), 4), put(central, name.size(), 2), put(central, 0, 6);
    put(central, 0, 2), put(central, 0, 4), put(central, offset, 4);
    central += name;
  }
  const std::size_t cd = out.size();
  out += central;
  put(out, 0x06054b50, 4), put(out, 0, 4), put(out, records.size(), 2);
  put(out, records.size(), 2), put(out, central.size(), 4), put(out, cd, 4), put(out, 0, 2);
  return out;
}

// Protocol-2 pickle pieces, as torch.save's pickler emits them.
struct Pickle {
  std::string b = "\x80\x02";
  Pickle& op(const std::string& ops) {
    b += ops;
    return *this;
  }
  Pickle& str(const std::string& s) {
    b += 'X';
    put(b, s.size(), 4);
    b += s;
    return *this;
  }
  Pickle& integer(std::int64_t v) {  // LONG1 with 8 bytes, so any value
    b += "\x8a\x08";
    put(b, static_cast<std::uint64_t>(v), 8);
    return *this;
  }
  Pickle& global(const std::string& module, const std::string& name) {
    b += "c" + module + "\n" + name + "\n";
    return *this;
  }
  // _rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict()) on the stack.
  Pickle& tensor(const std::string& key, const std::string& type, std::int64_t numel,
                 std::int64_t offset, const std::vector<std::int64_t>& size,
                 const std::vector<std::int64_t>& stride) {
    global("torch._utils", "_rebuild_tensor_v2").op("((").str("storage").global("torch", type);
    str(key).str("cpu").integer(numel).op("tQ").integer(offset).op("(");
    for (auto d : size) integer(d);
    op("t(");
    for (auto s : stride) integer(s);
    return op("t\x89").global("collections", "OrderedDict").op(")R").op("tR");
  }
  std::string stop() const { return b + "."; }
};

// {"a": (2, 3) view at 0, "b": (3,) view at 3} of one FloatStorage '0' of 6 elements.
std::string two_views() {
  Pickle p;
  p.op("}(").str("a").tensor("0", "FloatStorage", 6, 0, {2, 3}, {3, 1});
  p.str("b").tensor("0", "FloatStorage", 6, 3, {3}, {1}).op("u");
  return p.stop();
}

std::string six_floats() {
  std::string s;
  for (float v : {1.f, 2.f, 3.f, 4.f, 5.f, 6.f}) s.append(reinterpret_cast<char*>(&v), 4);
  return s;
}

std::string parse_error(const std::string& archive) {
  return error_of([&] { parse_pytorch_checkpoint(as_bytes(archive), "hand.bin"); });
}

std::string pickle_error(const std::string& pickle) {
  return parse_error(zip_of({{"m/data.pkl", pickle}, {"m/data/0", six_floats()}}));
}

TEST(HandMadeCheckpoint, ViewsOfOneStorage) {
  const std::string archive =
      zip_of({{"m/data.pkl", two_views()}, {"m/data/0", six_floats()}, {"m/version", "3\n"}});
  auto tensors = parse_pytorch_checkpoint(as_bytes(archive), "hand.bin");
  ASSERT_EQ(tensors.size(), 2u);
  EXPECT_EQ(tensors[0].name, "a");
  EXPECT_EQ(tensors[0].shape, (Shape{2, 3}));
  EXPECT_EQ(tensors[1].shape, Shape{3});
  EXPECT_EQ(tensors[1].bytes.data(), tensors[0].bytes.data() + 12);
  float b[3];
  read_f32(tensors[1], b);
  EXPECT_EQ(b[0], 4.f);
  EXPECT_EQ(b[2], 6.f);
}

TEST(HandMadeCheckpoint, EveryGlobalButAStateDictsIsRefusedByName) {
  for (auto [module, name] :
       std::vector<std::pair<std::string, std::string>>{{"builtins", "eval"},
                                                        {"torch.storage", "_load_from_bytes"},
                                                        {"torch", "Size"},
                                                        {"torch._utils", "_rebuild_qtensor"},
                                                        {"torch", "ComplexFloatStorage"},
                                                        {"collections", "OrderedDictX"}}) {
    std::string msg = pickle_error(Pickle().op("}").global(module, name).op("0.").b);
    EXPECT_NE(msg.find("hand.bin: refusing to load"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'" + module + "." + name + "'"), std::string::npos) << msg;
  }
  // STACK_GLOBAL (protocol 4) names go through the same list.
  Pickle p;
  p.op("\x8c\x08").b += "builtins";
  p.op("\x8c\x04").b += "exec";
  EXPECT_NE(pickle_error(p.op("\x93").stop()).find("'builtins.exec'"), std::string::npos);
}

TEST(HandMadeCheckpoint, MalformedPicklesAreErrors) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "truncated pickle"},
      {"\x80", "truncated pickle"},
      {Pickle().op("}").b, "truncated pickle"},  // no STOP
      {Pickle().op("i").stop(), "unsupported pickle opcode 0x69"},
      {Pickle().op("\x80\x06").stop(), "protocol newer than 5"},
      {Pickle().op("t").stop(), "no MARK"},
      {Pickle().op("R").stop(), "stack underflow"},
      {Pickle().op("(R").stop(), "stack underflow"},  // nothing pops below a MARK
      {Pickle().op("h\x05").stop(), "memo key 5 was never stored"},
      {Pickle().op("\x8a\x09").b + std::string(9, '\x01') + ".", "does not fit in 64 bits"},
      {Pickle().op("]").stop(), "data.pkl holds a list, not a state dict"},
      {Pickle().op("}K\x01K\x02s").stop(), "a key that is an int"},
      {Pickle().op("}(").str("x").op("K\x01u").stop(), "entry 'x' is an int, not a tensor"},
      {Pickle().op("}(").str("x").op("]q\x00h\x00"s).op("au").stop(), "entry 'x' is a list"},
      {Pickle().op("}(").str("x").op("u").stop(), "odd number of items"},
      {Pickle().op("]").str("x").op("b").stop(), "BUILD sets the state of a list"},
      {Pickle().op("K\x01K\x02").str("x").op("s").stop(), "SETITEM's target must be a dict"},
      {Pickle().global("collections", "OrderedDict").op("K\x01\x85R.").b,
       "OrderedDict called with arguments"},
      {Pickle().global("torch", "FloatStorage").op(")R.").b, "only as persistent references"},
      {Pickle().global("collections", "OrderedDict").str("x").op("R.").b,
       "REDUCE's arguments must be a tuple, found a str"},
      {Pickle().str("x").op("Q.").b, "a persistent id must be a tuple"},
      {Pickle().op("(").str("storage").op("K\x01t").op("Q.").b, "persistent id is not"},
  };
  for (const auto& [pickle, expected] : cases) {
    std::string msg = pickle_error(pickle);
    EXPECT_NE(msg.find(expected), std::string::npos) << "expected '" << expected << "': " << msg;
    EXPECT_NE(msg.find("hand.bin"), std::string::npos) << msg;
  }
}

TEST(HandMadeCheckpoint, DuplicateNamesAndBadViewsAreErrors) {
  auto dict = [](const std::function<void(Pickle&)>& items) {
    Pickle p;
    p.op("}(");
    items(p);
    return p.op("u").stop();
  };
  std::string msg = pickle_error(dict([](Pickle& p) {
    p.str("a").tensor("0", "FloatStorage", 6, 0, {6}, {1});
    p.str("a").tensor("0", "FloatStorage", 6, 0, {6}, {1});
  }));
  EXPECT_NE(msg.find("tensor 'a' appears twice"), std::string::npos) << msg;
  msg =
      pickle_error(dict([](Pickle& p) { p.str("a").tensor("0", "FloatStorage", 6, 4, {3}, {1}); }));
  EXPECT_NE(msg.find("tensor 'a': its 3 elements from storage offset 4 run past its storage"),
            std::string::npos)
      << msg;
  msg = pickle_error(dict([](Pickle& p) {
    p.str("a").tensor("0", "FloatStorage", 6, 0, {2, 3}, {1, 2});
  }));
  EXPECT_NE(msg.find("non-contiguous"), std::string::npos) << msg;
  msg = pickle_error(
      dict([](Pickle& p) { p.str("a").tensor("0", "FloatStorage", 6, -1, {3}, {1}); }));
  EXPECT_NE(msg.find("negative storage offset"), std::string::npos) << msg;
  msg = pickle_error(dict([](Pickle& p) {
    p.str("a").tensor("0", "FloatStorage", 6, 0, {2, 3}, {3});
  }));
  EXPECT_NE(msg.find("size has 2 dimensions but its stride 1"), std::string::npos) << msg;
  msg = pickle_error(dict([](Pickle& p) {
    p.str("a").tensor("0", "FloatStorage", 6, 0, {1 << 30, 1 << 30, 1 << 30}, {0, 0, 0});
  }));
  EXPECT_NE(msg.find("is too large"), std::string::npos) << msg;
  msg = pickle_error(dict([](Pickle& p) {
    p.str("a").tensor("0", "FloatStorage", 6, 0, {6}, {1});
    p.str("b").tensor("0", "HalfStorage", 12, 0, {12}, {1});
  }));
  EXPECT_NE(msg.find("storage '0' is referenced as F32 x 6 and as F16 x 12"), std::string::npos)
      << msg;
  // Empty tensors view nothing, whatever their offset and strides.
  auto tensors = parse_pytorch_checkpoint(
      as_bytes(zip_of({{"m/data.pkl", dict([](Pickle& p) {
                          p.str("e").tensor("0", "FloatStorage", 6, 100, {0, 5}, {7, 3});
                        })},
                       {"m/data/0", six_floats()}})),
      "hand.bin");
  ASSERT_EQ(tensors.size(), 1u);
  EXPECT_EQ(tensors[0].bytes.size(), 0u);
}

TEST(HandMadeCheckpoint, StorageRecordsMustMatch) {
  std::string msg = parse_error(zip_of({{"m/data.pkl", two_views()}}));
  EXPECT_NE(msg.find("storage '0' has no record m/data/0"), std::string::npos) << msg;
  msg = parse_error(zip_of({{"m/data.pkl", two_views()}, {"m/data/0", six_floats() + "x"}}));
  EXPECT_NE(msg.find("storage '0' should hold 6 elements of F32 but its record has 25 bytes"),
            std::string::npos)
      << msg;
}

TEST(HandMadeCheckpoint, ArchivesThatAreNotTorchSaveCheckpoints) {
  EXPECT_NE(parse_error("").find("does not begin with a zip signature"), std::string::npos);
  EXPECT_NE(parse_error("PK\x03\x04junk").find("no end-of-central-directory"), std::string::npos);
  EXPECT_NE(parse_error(Pickle().op("}").stop()).find("bare pickle"), std::string::npos);
  EXPECT_NE(parse_error(zip_of({{"m/other.pkl", "x"}})).find("without <name>/data.pkl"),
            std::string::npos);
  EXPECT_NE(parse_error(zip_of({{"data.pkl", two_views()}})).find("without <name>/data.pkl"),
            std::string::npos);
  EXPECT_NE(parse_error(zip_of({{"a/data.pkl", "x"}, {"b/data.pkl", "y"}})).find("two pickles"),
            std::string::npos);
  EXPECT_NE(parse_error(zip_of({{"m/data.pkl", two_views()}, {"m/constants.pkl", ""}}))
                .find("TorchScript"),
            std::string::npos);
  EXPECT_NE(parse_error(zip_of({{"m/data.pkl", "x"}, {"m/data.pkl", "y"}})).find("appears twice"),
            std::string::npos);
  EXPECT_NE(parse_error(zip_of({{"m/data.pkl", two_views()}, {"m/byteorder", "middle"}}))
                .find("unknown byteorder record 'middle'"),
            std::string::npos);
}

TEST(HandMadeCheckpoint, EveryTruncationAndByteFlipIsHandled) {
  const std::string archive = zip_of({{"m/data.pkl", two_views()}, {"m/data/0", six_floats()}});
  for (std::size_t n = 0; n < archive.size(); ++n) {
    EXPECT_NE(parse_error(archive.substr(0, n)), "") << "cut at " << n;
  }
  // A changed byte either still parses or is an Error; never a crash (the fuzzer goes further).
  for (std::size_t i = 0; i < archive.size(); ++i) {
    std::string flipped = archive;
    flipped[i] = static_cast<char>(flipped[i] ^ 0x5a);
    parse_error(flipped);
  }
}

}  // namespace
}  // namespace bertfit
