// WordPiece tokenization: one pass over the raw text that cleans, splits at
// whitespace, punctuation, CJK ideographs and literal special tokens, lowercases ASCII through a
// table, and sends each word through the greedy longest-match WordPiece lookup. Words with
// non-ASCII code points take the Unicode path in normalizer.cc.
#include "tokenizer/wordpiece.h"

#include <algorithm>
#include <utility>

#include "base/error.h"
#include "tokenizer/normalizer.h"

namespace bertfit {
namespace {

using tokenizer_detail::AsciiClass;
using tokenizer_detail::CharKind;
using tokenizer_detail::kAsciiClass;

// BertTokenizer's all_special_tokens, which its added-token trie keeps whole in raw text.
constexpr std::string_view kCls = "[CLS]", kSep = "[SEP]", kPad = "[PAD]", kUnk = "[UNK]",
                           kMask = "[MASK]";

constexpr std::array<char, 128> make_ascii_lower() {
  std::array<char, 128> t{};
  for (int c = 0; c < 128; ++c) t[c] = static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
  return t;
}
constexpr std::array<char, 128> kAsciiLower = make_ascii_lower();

// Per-thread buffers, reused across calls so that the steady state allocates nothing.
struct Scratch {
  std::string word;
  // With offsets: the source bytes [cp_begin[i], cp_end[i]) of the word's code point i.
  std::vector<std::uint32_t> cp_begin, cp_end;
  std::vector<std::uint32_t> identity;  // 0, 1, 2, ...: an ASCII word's byte i is code point i
  tokenizer_detail::WordNormalizer normalizer;
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

}  // namespace

void WordPieceTokenizer::tokenize_into(std::string_view text, std::vector<std::int32_t>& ids,
                                       std::vector<TokenOffset>* offsets) const {
  // Leftmost literal special tokens split the text; none is a prefix of another.
  const std::pair<std::string_view, std::int32_t> specials[] = {{kCls, special_.cls},
                                                                {kSep, special_.sep},
                                                                {kPad, special_.pad},
                                                                {kUnk, special_.unk},
                                                                {kMask, special_.mask}};
  Sink out{ids, offsets, 0};
  auto chunk = [&](std::string_view part) {
    if (offsets != nullptr) {
      tokenize_chunk<true>(part, out);
    } else {
      tokenize_chunk<false>(part, out);
    }
  };
  std::size_t pos = 0;
  for (std::size_t i = text.find('['); i != std::string_view::npos; i = text.find('[', i)) {
    const std::string_view rest = text.substr(i);
    const std::pair<std::string_view, std::int32_t>* hit = nullptr;
    for (const auto& s : specials) {
      if (rest.starts_with(s.first)) hit = &s;
    }
    if (hit == nullptr) {
      ++i;
      continue;
    }
    out.base = static_cast<std::uint32_t>(pos);
    chunk(text.substr(pos, i - pos));
    ids.push_back(hit->second);
    if (offsets != nullptr) {
      offsets->push_back(
          {static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(i + hit->first.size())});
    }
    i += hit->first.size();
    pos = i;
  }
  out.base = static_cast<std::uint32_t>(pos);
  chunk(text.substr(pos));
}

template <bool kOffsets>
void WordPieceTokenizer::tokenize_chunk(std::string_view text, Sink& out) const {
  Scratch& s = scratch();
  std::string& word = s.word;
  word.clear();
  s.cp_begin.clear();
  s.cp_end.clear();
  bool ascii = true;  // word holds only ASCII: no Unicode normalization needed
  const auto* const start = reinterpret_cast<const unsigned char*>(text.data());
  const auto* p = start;
  const auto* const end = p + text.size();
  auto at = [&](const unsigned char* q) { return static_cast<std::uint32_t>(q - start); };
  // Notes the source bytes [from, to) of the code point just added to word.
  auto source = [&](const unsigned char* from, const unsigned char* to) {
    if constexpr (kOffsets) {
      s.cp_begin.push_back(at(from));
      s.cp_end.push_back(at(to));
    }
  };
  while (p < end) {
    const unsigned char c = *p;
    if (c < 0x80) {
      switch (kAsciiClass[c]) {
        case AsciiClass::kWord: {
          const auto* q = p + 1;
          while (q < end && *q < 0x80 && kAsciiClass[*q] == AsciiClass::kWord) ++q;
          if constexpr (kOffsets) {
            for (const auto* r = p; r < q; ++r) source(r, r + 1);
          }
          if (lowercase_) {
            for (; p < q; ++p) word.push_back(kAsciiLower[*p]);
          } else {
            word.append(reinterpret_cast<const char*>(p), q - p);
            p = q;
          }
          break;
        }
        case AsciiClass::kSpace:
          finish_word<kOffsets>(word, ascii, out);
          ascii = true;
          ++p;
          break;
        case AsciiClass::kDrop:
          ++p;
          break;
        case AsciiClass::kPunct:
          finish_word<kOffsets>(word, ascii, out);
          ascii = true;
          out.ids.push_back(ascii_punct_id_[c]);
          if constexpr (kOffsets) {
            out.offsets->push_back({out.base + at(p), out.base + at(p) + 1});
          }
          ++p;
          break;
      }
      continue;
    }
    const auto* const cp_start = p;
    const char32_t cp = tokenizer_detail::decode_utf8(p, end);
    switch (tokenizer_detail::classify(cp)) {
      case CharKind::kWord:
        tokenizer_detail::append_utf8(word, cp);
        source(cp_start, p);
        ascii = false;
        break;
      case CharKind::kSpace:
        finish_word<kOffsets>(word, ascii, out);
        ascii = true;
        break;
      case CharKind::kDrop:
        break;
      case CharKind::kCjk:
        finish_word<kOffsets>(word, ascii, out);
        tokenizer_detail::append_utf8(word, cp);
        source(cp_start, p);
        finish_word<kOffsets>(word, false, out);
        ascii = true;
        break;
    }
  }
  finish_word<kOffsets>(word, ascii, out);
}

template <bool kOffsets>
void WordPieceTokenizer::finish_word(std::string& word, bool ascii, Sink& out) const {
  if (word.empty()) return;
  Scratch& s = scratch();
  if (ascii) {
    if constexpr (kOffsets) {
      for (auto i = static_cast<std::uint32_t>(s.identity.size()); i < word.size(); ++i) {
        s.identity.push_back(i);
      }
    }
    wordpiece<kOffsets>(word, word.size(), out,
                        {s.identity.data(), s.cp_begin.data(), s.cp_end.data()});
  } else {
    // Lowercasing and NFD never cross an ASCII punctuation or space (they act per code point
    // and canonical ordering stops at starters), so normalizing this word alone equals HF's
    // normalization of the whole whitespace token.
    tokenizer_detail::WordNormalizer& n = s.normalizer;
    n.run(word, lowercase_, strip_accents_);
    const std::string_view text = n.text();
    for (const tokenizer_detail::Piece& piece : n.pieces()) {
      wordpiece<kOffsets>(text.substr(piece.begin, piece.end - piece.begin), piece.cps, out,
                          {n.origins().data() + piece.begin, s.cp_begin.data(), s.cp_end.data()});
    }
  }
  word.clear();
  s.cp_begin.clear();
  s.cp_end.clear();
}

template <bool kOffsets>
void WordPieceTokenizer::wordpiece(std::string_view word, std::size_t cps, Sink& out,
                                   const SourceMap& source) const {
  // The source bytes of the word's bytes [from, to), from < to: from the first to the last
  // source code point they came from (canonical ordering may have swapped two).
  auto span = [&](std::size_t from, std::size_t to) {
    std::uint32_t first = source.origin[from], last = first;
    for (std::size_t i = from + 1; i < to; ++i) {
      first = std::min(first, source.origin[i]);
      last = std::max(last, source.origin[i]);
    }
    return TokenOffset{out.base + source.begin[first], out.base + source.end[last]};
  };
  if (cps > static_cast<std::size_t>(max_input_chars_per_word_)) {
    out.ids.push_back(special_.unk);
    if constexpr (kOffsets) out.offsets->push_back(span(0, word.size()));
    return;
  }
  const char* w = word.data();
  const std::size_t n = word.size();
  const std::size_t mark = out.ids.size();
  std::size_t offsets_mark = 0;
  if constexpr (kOffsets) offsets_mark = out.offsets->size();
  std::size_t start = 0;
  while (start < n) {
    const bool continuation = start > 0;
    // Longest match first; no key is longer than max_len, and a match ends on a code point.
    std::size_t stop = std::min(n, start + index_.max_len(continuation));
    std::int32_t id = -1;
    for (; stop > start; --stop) {
      if (stop < n && tokenizer_detail::is_utf8_continuation(w[stop])) continue;
      id = index_.find(w + start, stop - start, continuation);
      if (id >= 0) break;
    }
    if (id < 0) {
      out.ids.resize(mark);
      out.ids.push_back(special_.unk);
      if constexpr (kOffsets) {
        out.offsets->resize(offsets_mark);
        out.offsets->push_back(span(0, n));
      }
      return;
    }
    out.ids.push_back(id);
    if constexpr (kOffsets) out.offsets->push_back(span(start, stop));
    start = stop;
  }
}

}  // namespace bertfit
