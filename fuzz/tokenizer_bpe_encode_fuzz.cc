// libFuzzer target: arbitrary bytes through the byte-level BPE tokenizer of
// BERTFIT_SHARED_DIR/data/roberta-bpe (RobertaTokenizer semantics: added tokens, GPT-2 split,
// merges, the word cache). Checks: ids within the vocabulary; one offset per id, inside the
// text, ends never decreasing; ids with offsets equal ids without; a pre-split word and a pair
// encode within max_len with the <s> a </s></s> b </s> frame.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "tokenizer/tokenizer.h"

namespace {

void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "invariant violated: %s\n", what);
    std::abort();
  }
}

const bertfit::Tokenizer& tokenizer() {
  static const std::unique_ptr<bertfit::Tokenizer> tok =
      bertfit::load_tokenizer(std::string(BERTFIT_SHARED_DIR) + "/data/roberta-bpe");
  return *tok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto& tok = tokenizer();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::int32_t> ids;
  std::vector<bertfit::TokenOffset> offsets;
  tok.tokenize_into(text, ids, &offsets);
  require(ids.size() == offsets.size(), "one offset per id");
  std::uint32_t last_end = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    require(ids[i] >= 0 && ids[i] <= tok.max_id(), "id in vocabulary");
    require(offsets[i].begin <= offsets[i].end && offsets[i].end <= size, "offset inside text");
    require(offsets[i].end >= last_end, "offsets in order");
    last_end = offsets[i].end;
  }
  require(tok.tokenize_ids(text) == ids, "ids without offsets equal ids with offsets");
  std::vector<std::int32_t> word;
  tok.tokenize_word_into(text, word);
  for (std::int32_t id : word) require(id >= 0 && id <= tok.max_id(), "word id in vocabulary");

  const std::size_t half = size / 2;
  const int max_len = 4 + static_cast<int>(size % 29);
  const bertfit::Encoding e = tok.encode(text.substr(0, half), text.substr(half), max_len);
  require(e.input_ids.size() <= static_cast<std::size_t>(max_len), "length within max_len");
  require(e.input_ids.front() == tok.cls_id() && e.input_ids.back() == tok.sep_id(), "frame");
  for (std::int32_t t : e.token_type_ids) require(t == 0, "RoBERTa type ids are 0");
  return 0;
}
