// libFuzzer target: arbitrary bytes through WordPieceTokenizer::tokenize_ids and a pair encode().
// The vocabulary is bert-base-uncased from $BERTFIT_FUZZ_VOCAB, else
// BERTFIT_SHARED_DIR/data/vocab/bert-base-uncased.txt, else ../shared/... relative to the
// working directory. Checks the invariants every caller relies on: ids within the vocabulary,
// lengths bounded by max_len, type ids 0 then 1, an all-ones mask, and that pair encoding agrees
// with tokenizing each half; offsets that are each token's own bytes, in order.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_tokenizer.h"
#include "tokenizer/wordpiece.h"

namespace {

using bertfit::fuzz::tokenizer;

void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "invariant violated: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto& tok = tokenizer();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto ids = tok.tokenize_ids(text);
  for (std::int32_t id : ids) require(id >= 0 && id < tok.vocab_size(), "id in vocabulary");

  // First byte picks max_len (3..258) and the split point of the pair.
  if (size == 0) return 0;
  const int max_len = 3 + data[0];
  const std::string_view rest = text.substr(1);
  const std::size_t cut = rest.size() / 2;
  const std::string_view a = rest.substr(0, cut), b = rest.substr(cut);
  const bertfit::Encoding e = tok.encode(a, b, max_len);
  const std::size_t n = e.input_ids.size();
  require(n >= 3 && n <= static_cast<std::size_t>(max_len), "pair length within max_len");
  require(e.token_type_ids.size() == n && e.attention_mask.size() == n, "parallel arrays");
  require(e.input_ids.front() == tok.cls_id() && e.input_ids.back() == tok.sep_id(),
          "[CLS]..[SEP]");
  const auto a_ids = tok.tokenize_ids(a), b_ids = tok.tokenize_ids(b);
  const bertfit::Encoding e2 = tok.encode_ids(a_ids, b_ids, max_len);
  require(e2.input_ids == e.input_ids && e2.token_type_ids == e.token_type_ids, "encode_ids");
  // Layout: zeros for [CLS] a [SEP], ones for b [SEP]; kept tokens are prefixes of a and b;
  // exactly as many tokens as fit are kept.
  std::size_t zeros = 0;
  while (zeros < n && e.token_type_ids[zeros] == 0) ++zeros;
  require(zeros >= 2 && zeros < n, "type ids start with [CLS] a [SEP]");
  const std::size_t la = zeros - 2, lb = n - zeros - 1;
  require(la <= a_ids.size() && lb <= b_ids.size(), "kept lengths");
  require(la + lb == std::min(a_ids.size() + b_ids.size(), static_cast<std::size_t>(max_len - 3)),
          "kept as many as fit");
  require(e.input_ids[zeros - 1] == tok.sep_id(), "first [SEP]");
  require(std::equal(a_ids.begin(), a_ids.begin() + la, e.input_ids.begin() + 1), "a prefix");
  require(std::equal(b_ids.begin(), b_ids.begin() + lb, e.input_ids.begin() + zeros), "b prefix");
  for (std::size_t i = 0; i < n; ++i) {
    require(e.token_type_ids[i] == (i < zeros ? 0 : 1), "type ids");
    require(e.attention_mask[i] == 1, "mask");
  }
  // Offsets (issue 43): each token spans its own source bytes, in order, inside the text; only
  // tokens made from one source code point (a Hangul syllable's jamo) share bytes, so the spans
  // add up to at most the text plus 4 bytes a token (never a word's span per piece).
  std::vector<std::int32_t> with_ids;
  std::vector<bertfit::TokenOffset> offsets;
  tok.tokenize_into(text, with_ids, &offsets);
  require(with_ids == ids && offsets.size() == ids.size(), "offsets: one per token");
  std::size_t spanned = 0;
  for (std::size_t i = 0; i < offsets.size(); ++i) {
    require(offsets[i].begin < offsets[i].end && offsets[i].end <= size, "offset inside the text");
    if (i > 0) {
      require(offsets[i - 1].begin <= offsets[i].begin && offsets[i - 1].end <= offsets[i].end,
              "offsets in order");
    }
    spanned += offsets[i].end - offsets[i].begin;
  }
  require(spanned <= size + 4 * offsets.size(), "offsets: each token's own bytes");
  const bertfit::Encoding single = tok.encode(text, std::nullopt, max_len);
  require(single.input_ids.size() == std::min(ids.size() + 2, static_cast<std::size_t>(max_len)),
          "single length");
  return 0;
}
