// Special and added tokens matched in raw text, as transformers 4.28's slow tokenizers do
// (PreTrainedTokenizer.tokenize): the text is split at every occurrence (leftmost first, the
// longest token when several start at the same place), then whitespace next to a token is
// stripped: per its lstrip/rstrip flags for an AddedToken (RoBERTa's specials; <mask> has
// lstrip), on both sides for a token given as a plain string (XLM-R's <s>, </s>, ...). Text
// segments left empty are dropped. Whitespace is Python's str.isspace(). With
// set_strip_into_token (the tokenizers library's AddedVocabulary), the whitespace a token strips
// becomes part of the token's segment (its offsets cover it), and whitespace is Unicode's
// White_Space (Rust's char::is_whitespace). Private to the tokenizer module.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace bertfit::tokenizer_detail {

struct AddedToken {
  std::string content;
  std::int32_t id = -1;
  bool lstrip = false;  // eats the whitespace on its left
  bool rstrip = false;  // eats the whitespace on its right
};

// A piece of the text: bytes [begin, end); id >= 0 for an added token, -1 for plain text.
struct Segment {
  std::uint32_t begin, end;
  std::int32_t id;
};

class AddedTokenSplitter {
 public:
  // A later token with the same content replaces the earlier one.
  void add(const AddedToken& token);
  bool empty() const { return tokens_.empty(); }
  void set_strip_into_token(bool on) { strip_into_token_ = on; }
  // Appends text's segments to out (out is cleared first).
  void split(std::string_view text, std::vector<Segment>& out) const;

 private:
  std::vector<AddedToken> tokens_;
  bool strip_into_token_ = false;
};

// Python's str.isspace() for one code point.
bool is_python_space(char32_t cp);
// Unicode's White_Space (Rust's char::is_whitespace): Python's without U+001C..U+001F.
bool is_unicode_space(char32_t cp);

}  // namespace bertfit::tokenizer_detail
