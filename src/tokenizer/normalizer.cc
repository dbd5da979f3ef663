// Unicode side of the BasicTokenizer semantics: classification of non-ASCII code points, strict
// UTF-8 decoding, and the lowercase / NFD / strip-accents / punctuation split of one word.
#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include "base/check.h"

namespace bertfit::tokenizer_detail {
namespace {

constexpr char32_t kReplacement = 0xFFFD;

bool is_cont(unsigned char c) { return (c & 0xC0) == 0x80; }

int combining_class(char32_t cp) {
  return utf8proc_get_property(static_cast<utf8proc_int32_t>(cp))->combining_class;
}

utf8proc_category_t category(char32_t cp) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(cp));
}

}  // namespace

bool is_cjk(char32_t cp) {
  // The ranges of HF's _is_chinese_char (CJK Unified Ideographs and their extensions, CJK
  // Compatibility Ideographs and the supplement); Hiragana, Katakana and Hangul are not in it.
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

CharKind classify(char32_t cp) {
  if (cp == kReplacement) return CharKind::kDrop;
  if (is_cjk(cp)) return CharKind::kCjk;
  switch (category(cp)) {
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
      return CharKind::kDrop;
    case UTF8PROC_CATEGORY_ZS:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
      return CharKind::kSpace;
    default:
      return CharKind::kWord;
  }
}

bool is_punctuation(char32_t cp) {
  if (cp < 128) return kAsciiClass[cp] == AsciiClass::kPunct;
  const utf8proc_category_t c = category(cp);
  return c >= UTF8PROC_CATEGORY_PC && c <= UTF8PROC_CATEGORY_PO;
}

bool is_whitespace(char32_t cp) {
  if (cp < 128) return kAsciiClass[cp] == AsciiClass::kSpace;
  const utf8proc_category_t c = category(cp);
  return c == UTF8PROC_CATEGORY_ZS || c == UTF8PROC_CATEGORY_ZL || c == UTF8PROC_CATEGORY_ZP;
}

char32_t decode_utf8(const unsigned char*& p, const unsigned char* end) {
  const unsigned char c = p[0];
  const auto avail = end - p;
  if (c >= 0xC2 && c <= 0xDF) {
    if (avail >= 2 && is_cont(p[1])) {
      const char32_t cp = (char32_t(c & 0x1F) << 6) | (p[1] & 0x3F);
      p += 2;
      return cp;
    }
  } else if (c >= 0xE0 && c <= 0xEF) {
    // E0 needs A0..BF (no overlongs), ED needs 80..9F (no surrogates).
    const unsigned char lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    if (avail >= 3 && p[1] >= lo && p[1] <= hi && is_cont(p[2])) {
      const char32_t cp = (char32_t(c & 0x0F) << 12) | (char32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
      p += 3;
      return cp;
    }
  } else if (c >= 0xF0 && c <= 0xF4) {
    // F0 needs 90..BF (no overlongs), F4 needs 80..8F (nothing above U+10FFFF).
    const unsigned char lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    if (avail >= 4 && p[1] >= lo && p[1] <= hi && is_cont(p[2]) && is_cont(p[3])) {
      const char32_t cp = (char32_t(c & 0x07) << 18) | (char32_t(p[1] & 0x3F) << 12) |
                          (char32_t(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
      p += 4;
      return cp;
    }
  }
  ++p;
  return kReplacement;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string python_lower(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const auto* end = p + text.size();
  while (p < end) {
    const char32_t cp = *p < 0x80 ? *p++ : decode_utf8(p, end);
    if (cp == 0x130) {
      out.push_back('i');
      append_utf8(out, 0x307);
    } else {
      append_utf8(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
    }
  }
  return out;
}

void WordNormalizer::run(std::string_view word, bool lowercase, bool strip_accents) {
  // 1. Decode (the word was assembled from valid code points) and lowercase like str.lower().
  cps_.clear();
  cp_origin_.clear();
  const auto* p = reinterpret_cast<const unsigned char*>(word.data());
  const auto* end = p + word.size();
  for (std::uint32_t index = 0; p < end; ++index) {
    char32_t cp = *p < 0x80 ? *p++ : decode_utf8(p, end);
    if (lowercase) {
      if (cp == 0x130) {  // the one unconditional multi-code-point lowercase mapping
        cps_.push_back(U'i');
        cp_origin_.push_back(index);
        cp = 0x307;
      } else {
        cp = static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp)));
      }
    }
    cps_.push_back(cp);
    cp_origin_.push_back(index);
  }

  // 2. NFD: canonical decomposition of each code point, then canonical ordering (a stable
  // bubble sort of adjacent non-starters by combining class, as utf8proc and Python do).
  const std::vector<char32_t>* chars = &cps_;
  const std::vector<std::uint32_t>* origin = &cp_origin_;
  if (strip_accents) {
    decomposed_.clear();
    decomposed_origin_.clear();
    for (std::size_t c = 0; c < cps_.size(); ++c) {
      utf8proc_int32_t buf[16];
      int boundclass = 0;
      const utf8proc_ssize_t n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(cps_[c]),
                                                         buf, 16, UTF8PROC_DECOMPOSE, &boundclass);
      CHECK(n >= 1 && n <= 16, "utf8proc_decompose_char(", static_cast<std::uint32_t>(cps_[c]),
            ") returned ", n);
      for (utf8proc_ssize_t i = 0; i < n; ++i) {
        decomposed_.push_back(static_cast<char32_t>(buf[i]));
        decomposed_origin_.push_back(cp_origin_[c]);
      }
    }
    for (std::size_t i = 0; i + 1 < decomposed_.size();) {
      const int c1 = combining_class(decomposed_[i]), c2 = combining_class(decomposed_[i + 1]);
      if (c2 > 0 && c1 > c2) {
        std::swap(decomposed_[i], decomposed_[i + 1]);
        std::swap(decomposed_origin_[i], decomposed_origin_[i + 1]);
        i = i > 0 ? i - 1 : i + 1;
      } else {
        ++i;
      }
    }
    chars = &decomposed_;
    origin = &decomposed_origin_;
  }

  // 3. Drop Mn (strip accents), split at punctuation and whitespace, encode the pieces.
  text_.clear();
  origins_.clear();
  pieces_.clear();
  Piece cur{0, 0, 0};
  auto close = [&] {
    cur.end = static_cast<std::uint32_t>(text_.size());
    if (cur.end > cur.begin) pieces_.push_back(cur);
    cur = Piece{cur.end, cur.end, 0};
  };
  auto append = [&](char32_t cp, std::uint32_t from) {
    append_utf8(text_, cp);
    origins_.resize(text_.size(), from);
  };
  for (std::size_t c = 0; c < chars->size(); ++c) {
    const char32_t cp = (*chars)[c];
    if (strip_accents && cp >= 0x80 && category(cp) == UTF8PROC_CATEGORY_MN) continue;
    if (is_whitespace(cp)) {
      close();
    } else if (is_punctuation(cp)) {
      close();
      append(cp, (*origin)[c]);
      cur.cps = 1;
      close();
    } else {
      append(cp, (*origin)[c]);
      ++cur.cps;
    }
  }
  close();
}

}  // namespace bertfit::tokenizer_detail
