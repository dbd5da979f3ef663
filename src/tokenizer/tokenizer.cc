// WordPiece tokenization and pair encoding: one pass over the raw text that cleans, splits at
// whitespace, punctuation, CJK ideographs and literal special tokens, lowercases ASCII through a
// table, and sends each word through the greedy longest-match WordPiece lookup. Words with
// non-ASCII code points take the Unicode path in normalizer.cc.
#include "tokenizer/tokenizer.h"

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

std::vector<std::int32_t> WordPieceTokenizer::tokenize_ids(std::string_view text) const {
  std::vector<std::int32_t> out;
  out.reserve(text.size() / 4 + 4);
  tokenize_into(text, out);
  return out;
}

void WordPieceTokenizer::tokenize_into(std::string_view text,
                                       std::vector<std::int32_t>& out) const {
  // Leftmost literal special tokens split the text; none is a prefix of another.
  const std::pair<std::string_view, std::int32_t> specials[] = {
      {kCls, cls_id_}, {kSep, sep_id_}, {kPad, pad_id_}, {kUnk, unk_id_}, {kMask, mask_id_}};
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
    tokenize_chunk(text.substr(pos, i - pos), out);
    out.push_back(hit->second);
    i += hit->first.size();
    pos = i;
  }
  tokenize_chunk(text.substr(pos), out);
}

void WordPieceTokenizer::tokenize_chunk(std::string_view text,
                                        std::vector<std::int32_t>& out) const {
  Scratch& s = scratch();
  std::string& word = s.word;
  word.clear();
  bool ascii = true;  // word holds only ASCII: no Unicode normalization needed
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const auto* const end = p + text.size();
  while (p < end) {
    const unsigned char c = *p;
    if (c < 0x80) {
      switch (kAsciiClass[c]) {
        case AsciiClass::kWord: {
          const auto* q = p + 1;
          while (q < end && *q < 0x80 && kAsciiClass[*q] == AsciiClass::kWord) ++q;
          if (lowercase_) {
            for (; p < q; ++p) word.push_back(kAsciiLower[*p]);
          } else {
            word.append(reinterpret_cast<const char*>(p), q - p);
            p = q;
          }
          break;
        }
        case AsciiClass::kSpace:
          finish_word(word, ascii, out);
          ascii = true;
          ++p;
          break;
        case AsciiClass::kDrop:
          ++p;
          break;
        case AsciiClass::kPunct:
          finish_word(word, ascii, out);
          ascii = true;
          out.push_back(ascii_punct_id_[c]);
          ++p;
          break;
      }
      continue;
    }
    const char32_t cp = tokenizer_detail::decode_utf8(p, end);
    switch (tokenizer_detail::classify(cp)) {
      case CharKind::kWord:
        tokenizer_detail::append_utf8(word, cp);
        ascii = false;
        break;
      case CharKind::kSpace:
        finish_word(word, ascii, out);
        ascii = true;
        break;
      case CharKind::kDrop:
        break;
      case CharKind::kCjk:
        finish_word(word, ascii, out);
        tokenizer_detail::append_utf8(word, cp);
        finish_word(word, false, out);
        ascii = true;
        break;
    }
  }
  finish_word(word, ascii, out);
}

void WordPieceTokenizer::finish_word(std::string& word, bool ascii,
                                     std::vector<std::int32_t>& out) const {
  if (word.empty()) return;
  if (ascii) {
    wordpiece(word, word.size(), out);
  } else {
    // Lowercasing and NFD never cross an ASCII punctuation or space (they act per code point
    // and canonical ordering stops at starters), so normalizing this word alone equals HF's
    // normalization of the whole whitespace token.
    tokenizer_detail::WordNormalizer& n = scratch().normalizer;
    n.run(word, lowercase_, strip_accents_);
    const std::string_view text = n.text();
    for (const tokenizer_detail::Piece& piece : n.pieces()) {
      wordpiece(text.substr(piece.begin, piece.end - piece.begin), piece.cps, out);
    }
  }
  word.clear();
}

void WordPieceTokenizer::wordpiece(std::string_view word, std::size_t cps,
                                   std::vector<std::int32_t>& out) const {
  if (cps > static_cast<std::size_t>(max_input_chars_per_word_)) {
    out.push_back(unk_id_);
    return;
  }
  const char* w = word.data();
  const std::size_t n = word.size();
  const std::size_t mark = out.size();
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
      out.resize(mark);
      out.push_back(unk_id_);
      return;
    }
    out.push_back(id);
    start = stop;
  }
}

Encoding WordPieceTokenizer::encode(std::string_view a, std::optional<std::string_view> b,
                                    int max_len) const {
  std::optional<std::vector<std::int32_t>> b_ids;
  if (b) b_ids = tokenize_ids(*b);
  return encode_ids(tokenize_ids(a), std::move(b_ids), max_len);
}

Encoding WordPieceTokenizer::encode_ids(std::vector<std::int32_t> a,
                                        std::optional<std::vector<std::int32_t>> b,
                                        int max_len) const {
  const bool pair = b.has_value();
  const int specials = pair ? 3 : 2;
  if (max_len < specials) {
    throw_error("max_len ", max_len, " is too small: a ", pair ? "pair" : "single text", " needs ",
                specials, " tokens for [CLS] and [SEP] alone");
  }
  const std::size_t budget = static_cast<std::size_t>(max_len - specials);
  std::size_t la = a.size(), lb = pair ? b->size() : 0;
  if (la + lb > budget) {
    if (!pair) {
      la = budget;
    } else {
      // longest_first as transformers 4.28 runs it: one token at a time from the longer
      // sequence, from the second one when both are equally long.
      for (std::size_t remove = la + lb - budget; remove > 0; --remove) {
        if (la > lb) {
          --la;
        } else {
          --lb;
        }
      }
    }
  }
  Encoding e;
  e.truncated_tokens = static_cast<std::int64_t>(a.size() + (pair ? b->size() : 0) - la - lb);
  const std::size_t total = la + lb + static_cast<std::size_t>(specials);
  e.input_ids.reserve(total);
  e.input_ids.push_back(cls_id_);
  e.input_ids.insert(e.input_ids.end(), a.begin(), a.begin() + la);
  e.input_ids.push_back(sep_id_);
  const std::size_t first = e.input_ids.size();
  if (pair) {
    e.input_ids.insert(e.input_ids.end(), b->begin(), b->begin() + lb);
    e.input_ids.push_back(sep_id_);
  }
  e.token_type_ids.assign(total, 1);
  std::fill(e.token_type_ids.begin(), e.token_type_ids.begin() + first, 0);
  e.attention_mask.assign(total, 1);
  return e;
}

}  // namespace bertfit
