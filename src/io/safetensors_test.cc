// Safetensors round trips (F32/F64/I64, scalars, zero-sized tensors, metadata), half-precision
// reading from hand-built files, and parsing of the golden files produced by transformers.
#include "io/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/dtype.h"
#include "base/error.h"
#include "base/file.h"

namespace bertfit {
namespace {

std::string temp_path(const std::string& name) {
  auto dir =
      std::filesystem::temp_directory_path() / ("bertfit_io_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

// A file from a header text and raw data bytes.
std::string build_file(const std::string& header, const std::string& data) {
  std::uint64_t n = header.size();
  std::string out(reinterpret_cast<const char*>(&n), 8);
  return out + header + data;
}

TEST(Safetensors, RoundTripKeepsValuesShapesOrderAndMetadata) {
  std::vector<float> f32 = {1.5f, -2.25f, 3.0f, 1e-30f, -0.0f, 7.0f};
  std::vector<double> f64 = {3.141592653589793, -1e300};
  std::vector<std::int64_t> i64 = {0, -1, 1LL << 40};
  float scalar = 42.5f;
  std::vector<TensorToWrite> tensors = {
      {"w", SafetensorsDType::kF32, Shape{2, 3}, f32.data()},
      {"d", SafetensorsDType::kF64, Shape{2}, f64.data()},
      {"ids", SafetensorsDType::kI64, Shape{1, 3}, i64.data()},
      {"scalar", SafetensorsDType::kF32, Shape{}, &scalar},
      {"empty", SafetensorsDType::kF32, Shape{0, 4}, nullptr},
  };
  std::string path = temp_path("round.safetensors");
  write_safetensors(path, tensors, {{"format", "pt"}, {"note", "x y"}});

  std::string raw = read_file(path);
  std::uint64_t header_len;
  std::memcpy(&header_len, raw.data(), 8);
  EXPECT_EQ(header_len % 8, 0u);
  EXPECT_EQ(raw.size(), 8 + header_len + 24 + 16 + 24 + 4);

  auto file = SafetensorsFile::open(path);
  EXPECT_EQ(file.metadata().at("format"), "pt");
  EXPECT_EQ(file.metadata().at("note"), "x y");
  ASSERT_EQ(file.tensors().size(), 5u);
  // Written in the order given: the reader lists by offset; "empty" shares the end offset.
  EXPECT_EQ(file.tensors()[0].name, "w");
  EXPECT_EQ(file.tensors()[1].name, "d");
  EXPECT_EQ(file.tensors()[2].name, "ids");
  EXPECT_EQ(file.tensors()[3].name, "scalar");

  const TensorInfo* w = file.find("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype, SafetensorsDType::kF32);
  EXPECT_EQ(w->shape, (Shape{2, 3}));
  std::vector<float> back(6);
  file.read_f32(*w, back.data());
  EXPECT_EQ(std::memcmp(back.data(), f32.data(), 24), 0);  // bit-exact, including -0.0

  const TensorInfo* d = file.find("d");
  ASSERT_NE(d, nullptr);
  auto d_bytes = file.bytes(*d);
  ASSERT_EQ(d_bytes.size(), 16u);
  EXPECT_EQ(std::memcmp(d_bytes.data(), f64.data(), 16), 0);
  float d_as_f32[2];
  file.read_f32(*d, d_as_f32);
  EXPECT_EQ(d_as_f32[0], static_cast<float>(f64[0]));
  EXPECT_TRUE(std::isinf(d_as_f32[1]));

  const TensorInfo* ids = file.find("ids");
  ASSERT_NE(ids, nullptr);
  EXPECT_EQ(ids->dtype, SafetensorsDType::kI64);
  EXPECT_EQ(std::memcmp(file.bytes(*ids).data(), i64.data(), 24), 0);
  float sink[3];
  try {
    file.read_f32(*ids, sink);
    FAIL() << "reading I64 as f32 must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'ids'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }

  const TensorInfo* s = file.find("scalar");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->shape.rank(), 0u);
  EXPECT_EQ(s->shape.numel(), 1);
  float s_back = 0;
  file.read_f32(*s, &s_back);
  EXPECT_EQ(s_back, 42.5f);

  const TensorInfo* e = file.find("empty");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->shape, (Shape{0, 4}));
  EXPECT_EQ(e->bytes(), 0u);
  file.read_f32(*e, nullptr);  // nothing to copy
  EXPECT_EQ(file.find("missing"), nullptr);
}

TEST(Safetensors, WriterRejectsDuplicateNamesAndLeavesNoFile) {
  float x = 1;
  std::string path = temp_path("dup.safetensors");
  std::filesystem::remove(path);
  EXPECT_THROW(write_safetensors(path, {{"a", SafetensorsDType::kF32, Shape{1}, &x},
                                        {"a", SafetensorsDType::kF32, Shape{1}, &x}}),
               Error);
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(Safetensors, WritesDefaultFormatPtMetadata) {
  float x = 1;
  std::string path = temp_path("meta.safetensors");
  write_safetensors(path, {{"x", SafetensorsDType::kF32, Shape{1}, &x}});
  EXPECT_EQ(SafetensorsFile::open(path).metadata().at("format"), "pt");
}

TEST(Safetensors, ReadsF16AndBF16FromHandBuiltFiles) {
  // F16: 1.0 = 0x3c00, -2.0 = 0xc000, 65504 = 0x7bff, smallest subnormal 0x0001 = 2^-24.
  // BF16: 1.0 = 0x3f80, -0.5 = 0xbf00, 3.140625 = 0x4049.
  std::uint16_t f16[4] = {0x3c00, 0xc000, 0x7bff, 0x0001};
  std::uint16_t bf16[3] = {0x3f80, 0xbf00, 0x4049};
  // One byte of padding before the BF16 tensor puts it at an odd (unaligned) address.
  std::string data(reinterpret_cast<const char*>(f16), 8);
  data += 'x';
  data += std::string(reinterpret_cast<const char*>(bf16), 6);
  std::string header = R"({"h":{"dtype":"F16","shape":[4],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"BF16","shape":[3,1],"data_offsets":[9,15]}})";
  std::string path = temp_path("half.safetensors");
  write_file_atomic(path, build_file(header, data));
  auto file = SafetensorsFile::open(path);
  float h[4], b[3];
  file.read_f32(*file.find("h"), h);
  file.read_f32(*file.find("b"), b);
  EXPECT_EQ(h[0], 1.0f);
  EXPECT_EQ(h[1], -2.0f);
  EXPECT_EQ(h[2], 65504.0f);
  EXPECT_EQ(h[3], std::ldexp(1.0f, -24));
  EXPECT_EQ(b[0], 1.0f);
  EXPECT_EQ(b[1], -0.5f);
  EXPECT_EQ(b[2], 3.140625f);
  EXPECT_TRUE(file.metadata().empty());
}

TEST(Safetensors, MoveKeepsTheMapping) {
  float x[2] = {3, 4};
  std::string path = temp_path("move.safetensors");
  write_safetensors(path, {{"x", SafetensorsDType::kF32, Shape{2}, x}});
  auto a = SafetensorsFile::open(path);
  SafetensorsFile b = std::move(a);
  auto c = SafetensorsFile::open(path);
  c = std::move(b);
  float y[2];
  c.read_f32(*c.find("x"), y);
  EXPECT_EQ(y[1], 4.0f);
}

TEST(Safetensors, OpenNamesMissingPath) {
  try {
    SafetensorsFile::open("/nonexistent/dir/model.safetensors");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/model.safetensors"), std::string::npos);
  }
}

// The golden files written by transformers (F32 parameters, the I64 position_ids buffer, F64
// trajectory series) parse, and their sizes agree with the header.
TEST(Safetensors, GoldenFilesParse) {
  const std::string shared = BERTFIT_SHARED_DIR;
  for (const char* model : {"bert-tiny", "distilbert-tiny"}) {
    auto weights = SafetensorsFile::open(shared + "/golden/" + model + "/model/model.safetensors");
    EXPECT_EQ(weights.metadata().at("format"), "pt");
    EXPECT_GT(weights.tensors().size(), 30u);
    for (const auto& t : weights.tensors()) {
      EXPECT_TRUE(t.dtype == SafetensorsDType::kF32 || t.dtype == SafetensorsDType::kI64) << t.name;
    }
    const TensorInfo* emb = weights.find(std::string(model[0] == 'b' ? "bert" : "distilbert") +
                                         ".embeddings.word_embeddings.weight");
    ASSERT_NE(emb, nullptr);
    EXPECT_EQ(emb->shape, (Shape{30522, 64}));
    std::vector<float> values(emb->shape.numel());
    weights.read_f32(*emb, values.data());
    EXPECT_TRUE(std::isfinite(values.back()));

    auto golden = SafetensorsFile::open(shared + "/golden/" + model + "/golden.safetensors");
    EXPECT_NE(golden.find("eval.logits"), nullptr);
    const TensorInfo* lr = golden.find("traj.lr");
    ASSERT_NE(lr, nullptr);
    EXPECT_EQ(lr->dtype, SafetensorsDType::kF64);
  }
  auto bert = SafetensorsFile::open(shared + "/golden/bert-tiny/model/model.safetensors");
  const TensorInfo* pos = bert.find("bert.embeddings.position_ids");
  ASSERT_NE(pos, nullptr);
  EXPECT_EQ(pos->dtype, SafetensorsDType::kI64);
  EXPECT_EQ(pos->shape, (Shape{1, 512}));
  std::int64_t last;
  std::memcpy(&last, bert.bytes(*pos).data() + 511 * 8, 8);
  EXPECT_EQ(last, 511);
}

}  // namespace
}  // namespace bertfit
