// GPT-2's pre-tokenizer, written out by hand: the pieces of text that the regex
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// finds (Python's `regex` module, as RobertaTokenizer and the ByteLevel pre-tokenizer run it).
// \p{L} and \p{N} come from utf8proc's general categories; \s is Unicode White_Space (what the
// regex module matches). An invalid UTF-8 byte counts as one character outside L, N and \s.
// Private to the tokenizer module.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace bertfit::tokenizer_detail {

// Appends the pieces of text as byte ranges [begin, end) (relative to text) to out. The pieces
// cover text exactly, in order.
void gpt2_split(std::string_view text, std::vector<std::pair<std::uint32_t, std::uint32_t>>& out);

}  // namespace bertfit::tokenizer_detail
