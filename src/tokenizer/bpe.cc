// Byte-level BPE: building the symbol and merge tables, tokenizing a text (added tokens, prefix
// space, GPT-2 split, cached BPE per word) and the merge loop itself, which applies the
// lowest-ranked merge first with a heap over adjacent pairs (as the Rust tokenizers library
// does), so a long word costs O(n log n).
#include "tokenizer/bpe.h"

#include <algorithm>
#include <queue>

#include "base/error.h"
#include "tokenizer/gpt2_split.h"
#include "tokenizer/normalizer.h"

namespace bertfit {
namespace {

using tokenizer_detail::CachedPiece;

// GPT-2's bytes_to_unicode(): printable bytes map to themselves, the others to U+0100 onwards.
std::array<char32_t, 256> make_byte_chars() {
  std::array<char32_t, 256> chars{};
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
    chars[b] = printable ? static_cast<char32_t>(b) : next++;
  }
  return chars;
}

std::uint32_t count_code_points(std::string_view s) {
  std::uint32_t n = 0;
  for (char c : s) n += !tokenizer_detail::is_utf8_continuation(c);
  return n;
}

struct Scratch {
  std::string text;
  std::vector<tokenizer_detail::Segment> segments;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> words;
  std::vector<CachedPiece> pieces;
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

}  // namespace

void ByteLevelBpeTokenizer::build(Model model, const std::string& source) {
  std::unordered_map<std::string, std::int32_t> symbols;
  std::vector<std::string> names;
  auto intern = [&](std::string s) {
    const auto [it, fresh] = symbols.try_emplace(s, static_cast<std::int32_t>(names.size()));
    if (fresh) names.push_back(std::move(s));
    return it->second;
  };
  const std::array<char32_t, 256> byte_chars = make_byte_chars();
  for (int b = 0; b < 256; ++b) {
    std::string s;
    tokenizer_detail::append_utf8(s, byte_chars[b]);
    byte_symbol_[b] = intern(std::move(s));
  }
  merges_.reserve(model.merges.size());
  for (std::size_t rank = 0; rank < model.merges.size(); ++rank) {
    auto& [a, b] = model.merges[rank];
    const std::int32_t sa = intern(a), sb = intern(b);
    const std::int32_t result = intern(a + b);
    // A pair listed twice keeps its last rank, as a Python dict built from the list does.
    merges_.insert_or_assign(pair_key(sa, sb), Merge{static_cast<std::uint32_t>(rank), result});
  }
  std::int64_t max_id = -1;
  for (const auto& [token, id] : model.vocab) max_id = std::max<std::int64_t>(max_id, id);
  for (const auto& [id, token] : model.added) max_id = std::max<std::int64_t>(max_id, id);
  if (max_id < 0) throw_error(source, ": the vocabulary is empty");
  max_id_ = static_cast<std::int32_t>(max_id);
  id_token_.assign(static_cast<std::size_t>(max_id + 1), std::string());
  for (const auto& [token, id] : model.vocab) id_token_[id] = token;
  for (const auto& [id, token] : model.added) id_token_[id] = token;
  added_ids_.clear();
  for (const auto& [id, token] : model.added) added_ids_.push_back(id);
  std::sort(added_ids_.begin(), added_ids_.end());
  symbol_id_.resize(names.size());
  symbol_bytes_.resize(names.size());
  for (std::size_t s = 0; s < names.size(); ++s) {
    const auto it = model.vocab.find(names[s]);
    symbol_id_[s] = it == model.vocab.end() ? -1 : it->second;
    symbol_bytes_[s] = count_code_points(names[s]);
  }
}

std::string ByteLevelBpeTokenizer::token(std::int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= id_token_.size()) {
    throw_error("token id ", id, " is outside the vocabulary (0..", max_id_, ")");
  }
  return id_token_[id];
}

namespace {

// HF's ByteLevel trim_offsets (process_offsets) of one token's offsets o, its bytes `token`: the
// spaces it starts with move its start forward, those it ends with its end back (never past
// each other), except one leading space of the sequence's first token when a prefix space is
// added. A token of spaces alone is then empty, at its end.
TokenOffset trimmed(TokenOffset o, std::string_view token, bool first, bool prefix_space) {
  std::uint32_t leading = 0, trailing = 0;
  while (leading < token.size() && token[leading] == ' ') ++leading;
  while (trailing < token.size() && token[token.size() - 1 - trailing] == ' ') ++trailing;
  if ((first || o.begin == 0) && prefix_space && leading == 1) leading = 0;
  if (leading > 0) o.begin = std::min(o.begin + leading, o.end);
  if (trailing > 0 && o.end >= trailing) o.end = std::max(o.end - trailing, o.begin);
  return o;
}

}  // namespace

void ByteLevelBpeTokenizer::tokenize_into(std::string_view text, std::vector<std::int32_t>& ids,
                                          std::vector<TokenOffset>* offsets) const {
  tokenize_text(text, add_prefix_space_, ids, offsets);
}

void ByteLevelBpeTokenizer::tokenize_word_into(std::string_view word,
                                               std::vector<std::int32_t>& ids) const {
  tokenize_text(word, fast() ? add_prefix_space_ : true, ids, nullptr);
}

void ByteLevelBpeTokenizer::tokenize_text(std::string_view text, bool prefix_space,
                                          std::vector<std::int32_t>& ids,
                                          std::vector<TokenOffset>* offsets) const {
  Scratch& sc = scratch();
  std::string_view s = text;
  std::uint32_t shift = 0;  // bytes of the added prefix space
  if (prefix_space && !text.empty()) {
    const auto* p = reinterpret_cast<const unsigned char*>(text.data());
    const char32_t first = *p < 0x80 ? *p : tokenizer_detail::decode_utf8(p, p + text.size());
    if (!tokenizer_detail::is_python_space(first)) {
      sc.text.assign(1, ' ');
      sc.text.append(text);
      s = sc.text;
      shift = 1;
    }
  }
  const std::size_t first_token = ids.size();
  auto offset = [shift](std::uint32_t b, std::uint32_t e) {
    return TokenOffset{b > shift ? b - shift : 0, e > shift ? e - shift : 0};
  };
  if (added_.empty()) {
    sc.segments.assign(1, {0, static_cast<std::uint32_t>(s.size()), -1});
  } else {
    added_.split(s, sc.segments);
  }
  for (const tokenizer_detail::Segment& seg : sc.segments) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      if (offsets != nullptr) offsets->push_back(offset(seg.begin, seg.end));
      continue;
    }
    sc.words.clear();
    tokenizer_detail::gpt2_split(s.substr(seg.begin, seg.end - seg.begin), sc.words);
    for (const auto& [wb, we] : sc.words) {
      std::uint32_t pos = seg.begin + wb;
      sc.pieces.clear();
      bpe_word(s.substr(pos, we - wb), sc.pieces);
      for (const CachedPiece& piece : sc.pieces) {
        if (piece.id >= 0) {
          ids.push_back(piece.id);
          if (offsets != nullptr) {
            const TokenOffset o = offset(pos, pos + piece.bytes);
            offsets->push_back(trim_offsets_ ? trimmed(o, s.substr(pos, piece.bytes),
                                                       ids.size() - 1 == first_token, prefix_space)
                                             : o);
          }
        }
        pos += piece.bytes;
      }
    }
  }
}

void ByteLevelBpeTokenizer::bpe_word(std::string_view word, std::vector<CachedPiece>& out) const {
  if (cache_->find(word, out)) return;
  const std::size_t mark = out.size();
  merge_word(word, out);
  cache_->insert(word, out.data() + mark, out.size() - mark);
}

void ByteLevelBpeTokenizer::merge_word(std::string_view word, std::vector<CachedPiece>& out) const {
  struct Symbol {
    std::int32_t symbol;
    std::int32_t prev, next;  // neighbours still alive, -1 at the ends
    bool alive;
  };
  struct Candidate {
    std::uint32_t rank;
    std::int32_t pos;
    std::int32_t result;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  thread_local std::vector<Symbol> syms;
  thread_local std::vector<Candidate> heap_storage;
  const auto n = static_cast<std::int32_t>(word.size());
  syms.clear();
  for (std::int32_t i = 0; i < n; ++i) {
    syms.push_back(
        {byte_symbol_[static_cast<unsigned char>(word[i])], i - 1, i + 1 < n ? i + 1 : -1, true});
  }
  heap_storage.clear();
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap(
      std::greater<>{}, std::move(heap_storage));
  auto push = [&](std::int32_t pos) {
    const std::int32_t next = syms[pos].next;
    if (next < 0) return;
    const auto it = merges_.find(pair_key(syms[pos].symbol, syms[next].symbol));
    if (it != merges_.end()) heap.push({it->second.rank, pos, it->second.result});
  };
  for (std::int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const Candidate top = heap.top();
    heap.pop();
    Symbol& left = syms[top.pos];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = syms[left.next];
    const auto it = merges_.find(pair_key(left.symbol, right.symbol));
    if (it == merges_.end() || it->second.result != top.result) continue;  // stale
    left.symbol = top.result;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) syms[right.next].prev = top.pos;
    if (left.prev >= 0) push(left.prev);
    push(top.pos);
  }
  for (std::int32_t i = 0; i >= 0 && i < n; i = syms[i].next) {
    const std::int32_t id = symbol_id_[syms[i].symbol];
    out.push_back({id >= 0 ? id : special_.unk, symbol_bytes_[syms[i].symbol]});
  }
}

}  // namespace bertfit
