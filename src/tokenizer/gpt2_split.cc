// GPT-2's split pattern as a hand-written scanner over character classes (see gpt2_split.h).
// Each alternative of the pattern, tried in order at the current position, becomes one branch.
#include "tokenizer/gpt2_split.h"

#include <utf8proc.h>

#include <array>

#include "tokenizer/normalizer.h"

namespace bertfit::tokenizer_detail {
namespace {

enum class Cls : std::uint8_t { kLetter, kNumber, kSpace, kOther };

constexpr std::array<Cls, 128> make_ascii_cls() {
  std::array<Cls, 128> t{};
  for (int c = 0; c < 128; ++c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      t[c] = Cls::kLetter;
    } else if (c >= '0' && c <= '9') {
      t[c] = Cls::kNumber;
    } else if ((c >= 9 && c <= 13) || c == ' ') {
      t[c] = Cls::kSpace;
    } else {
      t[c] = Cls::kOther;
    }
  }
  return t;
}
constexpr std::array<Cls, 128> kAsciiCls = make_ascii_cls();

Cls classify_cp(char32_t cp) {
  if (cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
      cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000) {
    return Cls::kSpace;
  }
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
      return Cls::kLetter;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return Cls::kNumber;
    default:
      return Cls::kOther;
  }
}

// The class of the character at p and its end.
struct Char {
  Cls cls;
  std::uint32_t end;
};

class Scanner {
 public:
  explicit Scanner(std::string_view text)
      : p_(reinterpret_cast<const unsigned char*>(text.data())),
        n_(static_cast<std::uint32_t>(text.size())) {}

  Char at(std::uint32_t i) const {
    const unsigned char c = p_[i];
    if (c < 0x80) return {kAsciiCls[c], i + 1};
    const unsigned char* q = p_ + i;
    const char32_t cp = decode_utf8(q, p_ + n_);
    const auto end = static_cast<std::uint32_t>(q - p_);
    if (cp == 0xFFFD && end == i + 1) return {Cls::kOther, end};  // invalid byte
    return {classify_cp(cp), end};
  }
  // End of the run of class cls starting at i.
  std::uint32_t run(std::uint32_t i, Cls cls) const {
    while (i < n_) {
      const Char c = at(i);
      if (c.cls != cls) break;
      i = c.end;
    }
    return i;
  }
  // Length of the contraction ('s 't 're 've 'm 'll 'd) at i, or 0.
  std::uint32_t contraction(std::uint32_t i) const {
    if (p_[i] != '\'' || i + 1 >= n_) return 0;
    const unsigned char a = p_[i + 1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (i + 2 < n_) {
      const unsigned char b = p_[i + 2];
      if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    }
    return 0;
  }
  std::uint32_t size() const { return n_; }

 private:
  const unsigned char* p_;
  std::uint32_t n_;
};

}  // namespace

void gpt2_split(std::string_view text, std::vector<std::pair<std::uint32_t, std::uint32_t>>& out) {
  const Scanner s(text);
  const std::uint32_t n = s.size();
  std::uint32_t i = 0;
  while (i < n) {
    const std::uint32_t start = i;
    if (const std::uint32_t k = s.contraction(i); k > 0) {
      out.emplace_back(start, i + k);
      i += k;
      continue;
    }
    Char c = s.at(i);
    std::uint32_t body = i;  // where the letter / number / other run starts
    if (text[i] == ' ' && c.end < n) {
      const Char next = s.at(c.end);
      if (next.cls != Cls::kSpace) {  // " ?X+": the space joins the run after it
        body = c.end;
        c = next;
      }
    }
    if (c.cls != Cls::kSpace) {
      i = s.run(body, c.cls);
      out.emplace_back(start, i);
      continue;
    }
    // \s+(?!\S) | \s+ : a whitespace run; before a non-space character its last one is left
    // to start the next piece, unless the run is a single character.
    const std::uint32_t end = s.run(i, Cls::kSpace);
    if (end == n) {
      i = end;
    } else {
      std::uint32_t last = i;  // start of the run's last character
      for (std::uint32_t j = i; j < end; j = s.at(j).end) last = j;
      i = last > i ? last : end;
    }
    out.emplace_back(start, i);
  }
}

}  // namespace bertfit::tokenizer_detail
