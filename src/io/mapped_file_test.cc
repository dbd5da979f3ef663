// MappedFile: a file's bytes, and drop_resident_pages, after which they read the same (from the
// file again) while the process's resident file pages shrink.
#include "io/mapped_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace bertfit {
namespace {

// This process's resident pages of mapped files, in kB (RssFile, and RssShmem for a temporary
// folder on tmpfs, in /proc/self/status).
long rss_file_kb() {
  std::ifstream status("/proc/self/status");
  long kb = 0;
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("RssFile:", 0) == 0 || line.rfind("RssShmem:", 0) == 0) {
      kb += std::stol(line.substr(line.find(':') + 1));
    }
  }
  return kb;
}

TEST(MappedFile, DroppedPagesReadTheSameAndLeaveTheProcess) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("bertfit_mapped_" + std::to_string(getpid())))
          .string();
  const std::size_t n = std::size_t{4} << 20;
  {
    std::ofstream out(path, std::ios::binary);
    for (std::size_t i = 0; i < n; ++i) out.put(static_cast<char>(i * 7 % 251));
  }
  {
    MappedFile f = MappedFile::open(path);
    const auto bytes = f.bytes();
    ASSERT_EQ(bytes.size(), n);
    std::uint64_t sum = 0;
    for (std::byte b : bytes) sum += static_cast<unsigned char>(b);
    const long before = rss_file_kb();
    drop_resident_pages(bytes.subspan(100, n - 200));  // all but the first and last page
    const long after = rss_file_kb();
    EXPECT_GE(before - after, 3 * 1024) << before << " kB -> " << after << " kB";
    std::uint64_t again = 0;
    for (std::byte b : bytes) again += static_cast<unsigned char>(b);
    EXPECT_EQ(again, sum);
    for (std::size_t i = 0; i < n; i += 4093) {
      ASSERT_EQ(static_cast<unsigned char>(bytes[i]), i * 7 % 251) << i;
    }
    drop_resident_pages(bytes.subspan(1, 10));  // inside one page: nothing, no crash
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace bertfit
