// The torch.save zip bertfit writes (io/pytorch_write.h) read back by bertfit's own PyTorch
// reader: names, shapes, dtypes and values, every entry's data 64-byte aligned and its CRC-32 the
// zip standard's. (torch.load itself reads it: checked by hand with the oracle, docs/DESIGN.md.)
#include "io/pytorch_write.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "base/error.h"
#include "io/checkpoint.h"
#include "io/zip.h"

namespace bertfit {
namespace {

namespace fs = std::filesystem;

TEST(PytorchWrite, ReadsBackThroughThePytorchReader) {
  std::vector<float> w(8 * 16), b(8), s(1);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i) / 7.0f - 3.0f;
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = -static_cast<float>(i) * 0.5f;
  s[0] = 1e-30f;
  const std::string path =
      (fs::temp_directory_path() / cat("bertfit_pytorch_write_", ::getpid(), ".bin")).string();
  write_pytorch_state_dict(path, {{"linear.weight", SafetensorsDType::kF32, {8, 16}, w.data()},
                                  {"linear.bias", SafetensorsDType::kF32, {8}, b.data()},
                                  {"scale", SafetensorsDType::kF32, {1}, s.data()}});
  {
    const Checkpoint c = Checkpoint::open(path, CheckpointFormat::kPytorch);
    ASSERT_EQ(c.tensors().size(), 3u);
    for (const auto& [name, values, shape] :
         {std::tuple{"linear.weight", &w, Shape{8, 16}}, std::tuple{"linear.bias", &b, Shape{8}},
          std::tuple{"scale", &s, Shape{1}}}) {
      SCOPED_TRACE(name);
      const CheckpointTensor* t = c.find(name);
      ASSERT_NE(t, nullptr);
      EXPECT_EQ(t->shape, shape);
      EXPECT_EQ(t->dtype, SafetensorsDType::kF32);
      std::vector<float> got(values->size());
      read_f32(*t, got.data());
      EXPECT_EQ(got, *values);
    }
  }
  const std::string bytes =
      pytorch_state_dict_bytes({{"x", SafetensorsDType::kF32, {1}, s.data()}});
  const auto entries = read_zip(std::as_bytes(std::span(bytes.data(), bytes.size())), "x.bin");
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].name, "archive/data.pkl");
  EXPECT_EQ(entries[1].name, "archive/data/0");
  EXPECT_EQ(entries[2].name, "archive/version");
  for (const ZipEntry& e : entries) {
    EXPECT_EQ((e.data.data() - reinterpret_cast<const std::byte*>(bytes.data())) % 64, 0) << e.name;
  }
  // The CRC-32 of "3\n" (zlib.crc32(b"3\n")), in the central directory's copy of the header.
  const std::size_t at = bytes.find("PK\1\2");
  ASSERT_NE(at, std::string::npos);
  std::uint32_t crc = 0;
  const std::size_t last = bytes.rfind("PK\1\2");
  std::memcpy(&crc, bytes.data() + last + 16, 4);
  EXPECT_EQ(crc, 0x55679ED1u);
  fs::remove(path);
}

}  // namespace
}  // namespace bertfit
