// libFuzzer target: the tokenizer file readers on arbitrary content. The first byte picks the
// folder's files: 0 vocab.json + merges.txt (the rest split at the first "\n\n"), 1
// tokenizer.json, 2 vocab.json + merges.txt + tokenizer_config.json (split at "\n\n"). Loading
// must either succeed or throw bertfit::Error (one line); a loaded tokenizer then tokenizes
// a fixed text with special tokens and ids within its range.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "base/error.h"
#include "tokenizer/tokenizer.h"

namespace {

void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "invariant violated: %s\n", what);
    std::abort();
  }
}

const std::string& folder() {
  static const std::string dir = [] {
    std::string d = (std::filesystem::temp_directory_path() /
                     ("bertfit_tokenizer_files_fuzz_" + std::to_string(::getpid())))
                        .string();
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

void write(const std::string& name, std::string_view content) {
  std::ofstream(folder() + "/" + name, std::ios::binary | std::ios::trunc)
      .write(content.data(), static_cast<std::streamsize>(content.size()));
}

// The part before the first "\n\n" (moving rest past it), or all of rest.
std::string_view take(std::string_view& rest) {
  const std::size_t cut = rest.find("\n\n");
  const std::string_view part = rest.substr(0, cut);
  rest = cut == std::string_view::npos ? std::string_view() : rest.substr(cut + 2);
  return part;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  for (const char* f : {"vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json"}) {
    std::filesystem::remove(folder() + "/" + f);
  }
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0:
      write("vocab.json", take(rest));
      write("merges.txt", rest);
      break;
    case 1:
      write("tokenizer.json", rest);
      break;
    default:
      write("vocab.json", take(rest));
      write("merges.txt", take(rest));
      write("tokenizer_config.json", rest);
      break;
  }
  try {
    const auto tok = bertfit::load_tokenizer(folder());
    std::vector<std::int32_t> ids;
    std::vector<bertfit::TokenOffset> offsets;
    tok->tokenize_into("Hello <mask> world, it's 2 <s>x</s>", ids, &offsets);
    require(ids.size() == offsets.size(), "one offset per id");
    for (std::int32_t id : ids) require(id >= 0 && id <= tok->max_id(), "id in range");
    (void)tok->encode("a b", std::string_view("c"), 8);
  } catch (const bertfit::Error& e) {
    require(std::string_view(e.what()).find('\n') == std::string_view::npos, "one-line error");
  }
  return 0;
}
