// Character classes and word normalization of Hugging Face's BasicTokenizer (transformers 4.28):
// _clean_text, _tokenize_chinese_chars, _is_whitespace / _is_control / _is_punctuation, and the
// per-token str.lower() + NFD + drop-Mn + punctuation split. ASCII goes through lookup tables;
// only non-ASCII code points reach utf8proc. Private to the tokenizer module.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace bertfit::tokenizer_detail {

// What the raw-text pass does with one ASCII byte.
enum class AsciiClass : std::uint8_t {
  kWord,   // part of a word (letters, digits)
  kSpace,  // space, \t, \n, \r: ends the word
  kDrop,   // NUL and other control characters: removed, the word continues
  kPunct,  // HF _is_punctuation (33-47, 58-64, 91-96, 123-126): a word of its own
};

constexpr std::array<AsciiClass, 128> make_ascii_classes() {
  std::array<AsciiClass, 128> t{};
  for (int c = 0; c < 128; ++c) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      t[c] = AsciiClass::kSpace;
    } else if (c < 32 || c == 127) {
      t[c] = AsciiClass::kDrop;
    } else if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
               (c >= 123 && c <= 126)) {
      t[c] = AsciiClass::kPunct;
    } else {
      t[c] = AsciiClass::kWord;
    }
  }
  return t;
}
inline constexpr std::array<AsciiClass, 128> kAsciiClass = make_ascii_classes();

// What the raw-text pass does with one non-ASCII code point.
enum class CharKind : std::uint8_t {
  kWord,   // part of a word (it may still be punctuation: split after normalization)
  kSpace,  // Zs, Zl, Zp (Python's str.split() also splits at U+2028/U+2029)
  kDrop,   // U+FFFD and category C* (Cc, Cf, Cs, Co, Cn)
  kCjk,    // a CJK ideograph: a word of its own
};
CharKind classify(char32_t cp);

// HF _is_punctuation for any code point: the ASCII ranges above or Unicode category P*.
bool is_punctuation(char32_t cp);
// Whitespace as Python's str.split() sees it after cleaning (ASCII space/\t/\n/\r, Zs, Zl, Zp).
bool is_whitespace(char32_t cp);
bool is_cjk(char32_t cp);

// Decodes the code point at p (requires p < end and *p >= 0x80) and advances p past it.
// Invalid UTF-8 (stray continuation byte, bad lead byte, truncated sequence, overlong form,
// surrogate, > U+10FFFF) yields U+FFFD and advances by exactly one byte.
char32_t decode_utf8(const unsigned char*& p, const unsigned char* end);
// Python's str.lower() of valid UTF-8 text, as WordNormalizer lowercases (utf8proc's simple
// mapping and U+0130's two code points; Python's final-sigma rule is not applied).
std::string python_lower(std::string_view text);
void append_utf8(std::string& out, char32_t cp);
inline bool is_utf8_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// One piece of a normalized word: bytes [begin, end) of WordNormalizer::text(), cps code points.
struct Piece {
  std::uint32_t begin, end, cps;
};

// Normalizes one whitespace-delimited word that contains non-ASCII code points, exactly as
// BasicTokenizer does to one token: lowercase (Python str.lower(): simple case mapping, U+0130
// -> "i" U+0307), then if strip_accents NFD (canonical decomposition + canonical ordering) and
// removal of category Mn, then a split into pieces at punctuation (each punctuation code point a
// piece of its own) and whitespace. Reuses its buffers, so keep one per thread.
// origins(): for each byte of text(), the index of the word's code point it came from (as Hugging
// Face's NormalizedString aligns them: a lowercase or decomposition's code points all point at
// the one they came from; a removed code point leaves no byte).
class WordNormalizer {
 public:
  void run(std::string_view word, bool lowercase, bool strip_accents);
  const std::string& text() const { return text_; }
  const std::vector<Piece>& pieces() const { return pieces_; }
  const std::vector<std::uint32_t>& origins() const { return origins_; }

 private:
  std::vector<char32_t> cps_;
  std::vector<char32_t> decomposed_;
  std::vector<std::uint32_t> cp_origin_, decomposed_origin_;  // per code point of each
  std::string text_;
  std::vector<std::uint32_t> origins_;  // per byte of text_
  std::vector<Piece> pieces_;
};

}  // namespace bertfit::tokenizer_detail
