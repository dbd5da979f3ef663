// The Tokenizer interface's shared part: tokenize_ids, the BERT, RoBERTa and tokenizer.json
// templates around one or two texts with longest_first truncation (transformers' slow rule or
// the tokenizers library's), and byte -> character offsets.
#include <algorithm>
#include <utility>

#include "base/check.h"
#include "base/error.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/tokenizer.h"

namespace bertfit {

const char* tokenizer_kind_name(TokenizerKind kind) {
  switch (kind) {
    case TokenizerKind::kWordPiece:
      return "WordPiece";
    case TokenizerKind::kByteLevelBpe:
      return "byte-level BPE";
    case TokenizerKind::kSentencePiece:
      return "SentencePiece";
    case TokenizerKind::kDebertaSentencePiece:
      return "DeBERTa SentencePiece";
    case TokenizerKind::kFastByteLevelBpe:
      return "byte-level BPE (tokenizer.json, fast)";
  }
  return "?";
}

void Tokenizer::tokenize_word_into(std::string_view word, std::vector<std::int32_t>& ids) const {
  tokenize_into(word, ids, nullptr);
}

std::string_view Tokenizer::input_text(std::string_view text, std::string& buffer) const {
  if (!lowercase_input_) return text;
  buffer = tokenizer_detail::python_lower(text);
  return buffer;
}

std::vector<std::int32_t> Tokenizer::tokenize_ids(std::string_view text) const {
  std::vector<std::int32_t> out;
  out.reserve(text.size() / 4 + 4);
  std::string lowered;
  tokenize_into(input_text(text, lowered), out, nullptr);
  return out;
}

int Tokenizer::num_special_tokens(bool pair) const {
  if (template_ == PairTemplate::kTemplate) {
    int n = 0;
    for (const TemplatePiece& p : pair ? post_template_.pair : post_template_.single) {
      if (p.sequence < 0) n += static_cast<int>(p.ids.size());
    }
    return n;
  }
  if (!pair) return 2;
  return template_ == PairTemplate::kBert ? 3 : 4;
}

Encoding Tokenizer::encode(std::string_view a, std::optional<std::string_view> b, int max_len,
                           bool with_offsets) const {
  std::string a_lowered, b_lowered;
  a = input_text(a, a_lowered);
  if (b) b = input_text(*b, b_lowered);
  std::vector<std::int32_t> a_ids, b_ids;
  std::vector<TokenOffset> a_offsets, b_offsets;
  a_ids.reserve(a.size() / 4 + 4);
  tokenize_into(a, a_ids, with_offsets ? &a_offsets : nullptr);
  std::optional<std::vector<std::int32_t>> b_opt;
  if (b) {
    b_ids.reserve(b->size() / 4 + 4);
    tokenize_into(*b, b_ids, with_offsets ? &b_offsets : nullptr);
    b_opt = std::move(b_ids);
  }
  return assemble(std::move(a_ids), with_offsets ? &a_offsets : nullptr, std::move(b_opt),
                  with_offsets && b ? &b_offsets : nullptr, max_len);
}

std::pair<std::size_t, std::size_t> Tokenizer::kept_lengths(std::size_t la, std::size_t lb,
                                                            bool pair, std::size_t budget) const {
  if (la + lb <= budget) return {la, lb};
  if (!pair) return {budget, 0};
  if (truncation_ == PairTruncation::kHalves) {
    // The tokenizers library's truncate_encodings (LongestFirst) with its lengths n1 <= n2.
    const bool swap = la > lb;
    std::size_t n1 = swap ? lb : la, n2;
    n2 = n1 > budget ? n1 : std::max(n1, budget - n1);
    if (n1 + n2 > budget) {
      n1 = budget / 2;
      n2 = n1 + budget % 2;
    }
    if (swap) std::swap(n1, n2);
    return {std::min(la, n1), std::min(lb, n2)};
  }
  // longest_first as transformers 4.28 runs it: one token at a time from the longer sequence,
  // from the second one when both are equally long.
  for (std::size_t remove = la + lb - budget; remove > 0; --remove) {
    if (la > lb) {
      --la;
    } else {
      --lb;
    }
  }
  return {la, lb};
}

Encoding Tokenizer::encode_ids(std::vector<std::int32_t> a,
                               std::optional<std::vector<std::int32_t>> b, int max_len,
                               std::vector<TokenOffset>* a_offsets,
                               std::vector<TokenOffset>* b_offsets) const {
  CHECK(a_offsets == nullptr || a_offsets->size() == a.size(), "offsets for ", a.size(), " ids");
  CHECK(b_offsets == nullptr || (b && b_offsets->size() == b->size() && a_offsets != nullptr),
        "offsets of b without a's or of another length");
  CHECK(a_offsets == nullptr || !b || b_offsets != nullptr, "offsets of a without b's");
  return assemble(std::move(a), a_offsets, std::move(b), b_offsets, max_len);
}

Encoding Tokenizer::assemble(std::vector<std::int32_t> a, std::vector<TokenOffset>* a_offsets,
                             std::optional<std::vector<std::int32_t>> b,
                             std::vector<TokenOffset>* b_offsets, int max_len) const {
  const bool pair = b.has_value();
  const int specials = num_special_tokens(pair);
  if (max_len < specials) {
    throw_error("max_len ", max_len, " is too small: a ", pair ? "pair" : "single text", " needs ",
                specials, " special tokens alone");
  }
  const std::size_t budget = static_cast<std::size_t>(max_len - specials);
  const auto [la, lb] = kept_lengths(a.size(), pair ? b->size() : 0, pair, budget);
  Encoding e;
  e.truncated_tokens = static_cast<std::int64_t>(a.size() + (pair ? b->size() : 0) - la - lb);
  const std::size_t total = la + lb + static_cast<std::size_t>(specials);
  const bool offsets = a_offsets != nullptr;
  e.input_ids.reserve(total);
  if (offsets) e.offsets.reserve(total);
  auto special = [&](std::int32_t id) {
    e.input_ids.push_back(id);
    if (offsets) e.offsets.push_back({0, 0});
  };
  auto text = [&](const std::vector<std::int32_t>& ids, const std::vector<TokenOffset>* offs,
                  std::size_t n) {
    e.input_ids.insert(e.input_ids.end(), ids.begin(), ids.begin() + n);
    if (offsets) e.offsets.insert(e.offsets.end(), offs->begin(), offs->begin() + n);
  };
  if (template_ == PairTemplate::kTemplate) {
    e.token_type_ids.reserve(total);
    for (const TemplatePiece& p : pair ? post_template_.pair : post_template_.single) {
      if (p.sequence < 0) {
        for (std::int32_t id : p.ids) special(id);
      } else if (p.sequence == 0) {
        text(a, a_offsets, la);
      } else {
        text(*b, b_offsets, lb);
      }
      e.token_type_ids.resize(e.input_ids.size(), p.type_id);
    }
    CHECK(e.input_ids.size() == total, "template of ", e.input_ids.size(), " tokens, not ", total);
    e.attention_mask.assign(total, 1);
    return e;
  }
  special(special_.cls);
  text(a, a_offsets, la);
  special(special_.sep);
  std::size_t first = e.input_ids.size();  // tokens of type 0
  if (pair) {
    if (template_ == PairTemplate::kRoberta) special(special_.sep);
    text(*b, b_offsets, lb);
    special(special_.sep);
    if (template_ == PairTemplate::kRoberta) first = e.input_ids.size();
  }
  e.token_type_ids.assign(total, 1);
  std::fill(e.token_type_ids.begin(), e.token_type_ids.begin() + first, 0);
  e.attention_mask.assign(total, 1);
  return e;
}

std::vector<TokenOffset> byte_to_char_offsets(std::string_view text,
                                              const std::vector<TokenOffset>& offsets) {
  // chars[i]: code points before byte i (a byte inside a code point maps to its start).
  std::vector<std::uint32_t> chars(text.size() + 1, 0);
  const auto* const start = reinterpret_cast<const unsigned char*>(text.data());
  const auto* p = start;
  const auto* const end = start + text.size();
  std::uint32_t n = 0;
  while (p < end) {
    const auto* q = p;
    if (*q < 0x80) {
      ++q;
    } else {
      tokenizer_detail::decode_utf8(q, end);
    }
    for (const auto* r = p; r < q; ++r) chars[r - start] = n;
    ++n;
    p = q;
  }
  chars[text.size()] = n;
  std::vector<TokenOffset> out;
  out.reserve(offsets.size());
  for (const TokenOffset& o : offsets) {
    CHECK(o.begin <= o.end && o.end <= text.size(), "offset [", o.begin, ", ", o.end,
          ") outside a text of ", text.size(), " bytes");
    out.push_back({chars[o.begin], o.end > o.begin && chars[o.end] == chars[o.end - 1]
                                       ? chars[o.end] + 1
                                       : chars[o.end]});
  }
  return out;
}

}  // namespace bertfit
