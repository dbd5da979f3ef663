// Helpers of the families' convert_tokens_to_string (decode.cc): Python's str.strip() and
// bytes.decode("utf-8", errors="replace"). Private to the tokenizer module.
#pragma once

#include <string>
#include <string_view>

namespace bertfit::tokenizer_detail {

// s without the leading and trailing code points Python's str.isspace() accepts.
std::string python_strip(std::string_view s);

// bytes as UTF-8 with each maximal invalid subpart (a lead byte and the continuation bytes that
// fit it; a lone continuation or bad byte alone) replaced by U+FFFD, as CPython's decoder with
// errors="replace" does.
std::string utf8_replace_invalid(std::string_view bytes);

}  // namespace bertfit::tokenizer_detail
