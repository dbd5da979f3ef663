// Splitting raw text at special and added tokens with transformers' whitespace stripping (see
// added_tokens.h).
#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "tokenizer/normalizer.h"

namespace bertfit::tokenizer_detail {

bool is_python_space(char32_t cp) {
  if (cp < 0x80) return (cp >= 9 && cp <= 13) || (cp >= 0x1C && cp <= 0x20);
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

bool is_unicode_space(char32_t cp) { return is_python_space(cp) && !(cp >= 0x1C && cp <= 0x1F); }

namespace {

// Code point at p (advancing p); invalid bytes read as U+FFFD, one byte each.
char32_t next_cp(const unsigned char*& p, const unsigned char* end) {
  if (*p < 0x80) return *p++;
  return decode_utf8(p, end);
}

// Bytes of [begin, end) after stripping leading (left) or trailing (right) whitespace (Python's,
// or Unicode's when unicode).
void strip(std::string_view text, Segment& s, bool left, bool right, bool unicode) {
  auto is_space = [unicode](char32_t cp) {
    return unicode ? is_unicode_space(cp) : is_python_space(cp);
  };
  const auto* base = reinterpret_cast<const unsigned char*>(text.data());
  if (left) {
    const auto* p = base + s.begin;
    const auto* end = base + s.end;
    while (p < end) {
      const auto* q = p;
      if (!is_space(next_cp(q, end))) break;
      p = q;
    }
    s.begin = static_cast<std::uint32_t>(p - base);
  }
  if (right) {
    const auto* p = base + s.begin;
    const auto* end = base + s.end;
    const auto* last = p;  // end of the last non-space code point
    while (p < end) {
      if (!is_space(next_cp(p, end))) last = p;
    }
    s.end = static_cast<std::uint32_t>(last - base);
  }
}

}  // namespace

void AddedTokenSplitter::add(const AddedToken& token) {
  if (token.content.empty()) return;
  for (AddedToken& t : tokens_) {
    if (t.content == token.content) {
      t = token;
      return;
    }
  }
  tokens_.push_back(token);
}

void AddedTokenSplitter::split(std::string_view text, std::vector<Segment>& out) const {
  out.clear();
  std::vector<const AddedToken*> hits;  // the token of each added-token segment, by position
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t best = std::string_view::npos;
    const AddedToken* hit = nullptr;
    for (const AddedToken& t : tokens_) {
      const std::size_t i = text.find(t.content, pos);
      if (i == std::string_view::npos) continue;
      if (i < best || (i == best && t.content.size() > hit->content.size())) {
        best = i;
        hit = &t;
      }
    }
    if (hit == nullptr) break;
    if (best > pos) {
      out.push_back({static_cast<std::uint32_t>(pos), static_cast<std::uint32_t>(best), -1});
    }
    out.push_back({static_cast<std::uint32_t>(best),
                   static_cast<std::uint32_t>(best + hit->content.size()), hit->id});
    hits.resize(out.size(), nullptr);
    hits.back() = hit;
    pos = best + hit->content.size();
  }
  if (pos < text.size()) {
    out.push_back({static_cast<std::uint32_t>(pos), static_cast<std::uint32_t>(text.size()), -1});
  }
  hits.resize(out.size(), nullptr);
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (hits[i] == nullptr) continue;
    if (hits[i]->rstrip && i + 1 < out.size() && hits[i + 1] == nullptr) {
      strip(text, out[i + 1], true, false, strip_into_token_);
      if (strip_into_token_) out[i].end = out[i + 1].begin;
    }
    if (hits[i]->lstrip && i > 0 && hits[i - 1] == nullptr) {
      strip(text, out[i - 1], false, true, strip_into_token_);
      if (strip_into_token_) out[i].begin = out[i - 1].end;
    }
  }
  std::erase_if(out, [](const Segment& s) { return s.id < 0 && s.begin >= s.end; });
}

}  // namespace bertfit::tokenizer_detail
