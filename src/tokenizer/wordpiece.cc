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
  bool ascii = true;  // word holds only ASCII: no Unicode normalization needed
  const auto* const start = reinterpret_cast<const unsigned char*>(text.data());
  const auto* p = start;
  const auto* const end = p + text.size();
  std::uint32_t begin = 0, stop = 0;  // source bytes of word, relative to text
  auto at = [&](const unsigned char* q) { return static_cast<std::uint32_t>(q - start); };
  while (p < end) {
    const unsigned char c = *p;
    if (c < 0x80) {
      switch (kAsciiClass[c]) {
        case AsciiClass::kWord: {
          const auto* q = p + 1;
          while (q < end && *q < 0x80 && kAsciiClass[*q] == AsciiClass::kWord) ++q;
          if constexpr (kOffsets) {
            if (word.empty()) begin = at(p);
            stop = at(q);
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
          finish_word<kOffsets>(word, ascii, out, begin, stop);
          ascii = true;
          ++p;
          break;
        case AsciiClass::kDrop:
          ++p;
          break;
        case AsciiClass::kPunct:
          finish_word<kOffsets>(word, ascii, out, begin, stop);
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
        if constexpr (kOffsets) {
          if (word.empty()) begin = at(cp_start);
          stop = at(p);
        }
        tokenizer_detail::append_utf8(word, cp);
        ascii = false;
        break;
      case CharKind::kSpace:
        finish_word<kOffsets>(word, ascii, out, begin, stop);
        ascii = true;
        break;
      case CharKind::kDrop:
        break;
      case CharKind::kCjk:
        finish_word<kOffsets>(word, ascii, out, begin, stop);
        tokenizer_detail::append_utf8(word, cp);
        finish_word<kOffsets>(word, false, out, at(cp_start), at(p));
        ascii = true;
        break;
    }
  }
  finish_word<kOffsets>(word, ascii, out, begin, stop);
}

template <bool kOffsets>
void WordPieceTokenizer::finish_word(std::string& word, bool ascii, Sink& out, std::uint32_t begin,
                                     std::uint32_t end) const {
  if (word.empty()) return;
  if (ascii) {
    wordpiece<kOffsets>(word, word.size(), out, word.size() == end - begin, begin, end);
  } else {
    // Lowercasing and NFD never cross an ASCII punctuation or space (they act per code point
    // and canonical ordering stops at starters), so normalizing this word alone equals HF's
    // normalization of the whole whitespace token.
    tokenizer_detail::WordNormalizer& n = scratch().normalizer;
    n.run(word, lowercase_, strip_accents_);
    const std::string_view text = n.text();
    for (const tokenizer_detail::Piece& piece : n.pieces()) {
      wordpiece<kOffsets>(text.substr(piece.begin, piece.end - piece.begin), piece.cps, out, false,
                          begin, end);
    }
  }
  word.clear();
}

template <bool kOffsets>
void WordPieceTokenizer::wordpiece(std::string_view word, std::size_t cps, Sink& out, bool exact,
                                   std::uint32_t begin, std::uint32_t end) const {
  const TokenOffset whole{out.base + begin, out.base + end};
  if (cps > static_cast<std::size_t>(max_input_chars_per_word_)) {
    out.ids.push_back(special_.unk);
    if constexpr (kOffsets) out.offsets->push_back(whole);
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
        out.offsets->push_back(whole);
      }
      return;
    }
    out.ids.push_back(id);
    if constexpr (kOffsets) {
      out.offsets->push_back(exact ? TokenOffset{whole.begin + static_cast<std::uint32_t>(start),
                                                 whole.begin + static_cast<std::uint32_t>(stop)}
                                   : whole);
    }
    start = stop;
  }
}

}  // namespace bertfit
