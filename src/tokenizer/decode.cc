// Tokenizer::decode (tokenizer.h): ids back to text as transformers 4.28.1's slow tokenizers do
// it (PreTrainedTokenizer._decode with spaces_between_special_tokens, then
// clean_up_tokenization), each family's convert_tokens_to_string (BertTokenizer,
// RobertaTokenizer, XLMRobertaTokenizer; a fast byte-level BPE: the tokenizers library's
// ByteLevel decoder), and the helpers they share: Python's str.strip() and
// bytes.decode("utf-8", errors="replace").
#include <sentencepiece_processor.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/decode_util.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/sentencepiece.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/wordpiece.h"

namespace bertfit {
namespace {

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  std::size_t at = 0;
  for (std::size_t hit; (hit = s.find(from, at)) != std::string::npos; at = hit + from.size()) {
    out.append(s, at, hit - at);
    out.append(to);
  }
  out.append(s, at, std::string::npos);
  s = std::move(out);
}

// PreTrainedTokenizerBase.clean_up_tokenization: the replacements one after another, in order.
void clean_up_tokenization(std::string& s) {
  static constexpr std::pair<std::string_view, std::string_view> kRules[] = {
      {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules) replace_all(s, from, to);
}

// GPT-2's bytes_to_unicode() inverted: a byte-level character -> the byte it stands for (-1:
// none; such characters, e.g. of a token added to vocab.json by hand, keep their own UTF-8).
struct ByteDecoder {
  std::array<std::int16_t, 324> byte_of;
  ByteDecoder() {
    byte_of.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
      byte_of[printable ? static_cast<char32_t>(b) : next++] = static_cast<std::int16_t>(b);
    }
  }
};

}  // namespace

namespace tokenizer_detail {

std::string python_strip(std::string_view s) {
  const auto* begin = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = begin + s.size();
  // The code points' starts; the kept range runs from the first to past the last non-space.
  const unsigned char* first = end;
  const unsigned char* last = begin;
  for (const unsigned char* p = begin; p < end;) {
    const unsigned char* start = p;
    const char32_t cp = *p < 0x80 ? *p++ : decode_utf8(p, end);
    if (!is_python_space(cp)) {
      first = std::min(first, start);
      last = p;
    }
  }
  if (first >= last) return std::string();
  return std::string(reinterpret_cast<const char*>(first), static_cast<std::size_t>(last - first));
}

std::string utf8_replace_invalid(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::size_t n = bytes.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned char b = s[i];
    if (b < 0x80) {
      out.push_back(static_cast<char>(b));
      ++i;
      continue;
    }
    // The continuation bytes a lead byte needs, and the range its first one must lie in (which
    // rules out overlong forms, surrogates and code points above U+10FFFF).
    int need = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) {
      need = 1;
    } else if (b >= 0xE0 && b <= 0xEF) {
      need = 2;
      if (b == 0xE0) lo = 0xA0;
      if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      need = 3;
      if (b == 0xF0) lo = 0x90;
      if (b == 0xF4) hi = 0x8F;
    }
    std::size_t j = i + 1;
    bool whole = need > 0;
    for (int k = 0; k < need; ++k, lo = 0x80, hi = 0xBF) {
      if (j < n && s[j] >= lo && s[j] <= hi) {
        ++j;
      } else {
        whole = false;
        break;
      }
    }
    // A maximal invalid subpart (the lead byte and the continuation bytes that fit) is one
    // U+FFFD, as Python's decoder replaces it.
    if (whole) {
      out.append(bytes.substr(i, j - i));
    } else {
      out.append("\xEF\xBF\xBD");
    }
    i = j;
  }
  return out;
}

}  // namespace tokenizer_detail

bool Tokenizer::is_special_id(std::int32_t id) const {
  if (id < 0) return false;
  for (std::int32_t s : {special_.cls, special_.sep, special_.pad, special_.unk, special_.mask}) {
    if (s == id) return true;
  }
  return std::find(extra_special_ids_.begin(), extra_special_ids_.end(), id) !=
         extra_special_ids_.end();
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids, bool skip_special_tokens,
                              std::optional<bool> clean_up) const {
  std::vector<std::string> parts, run;
  for (std::int32_t id : ids) {
    if (id < 0 || id > max_id_) {
      throw_error("token id ", id, " is outside the vocabulary (0..", max_id_, ")");
    }
    if (skip_special_tokens && is_special_id(id)) continue;
    if (is_added_id(id)) {
      if (!run.empty()) parts.push_back(tokens_to_string(run));
      run.clear();
      parts.push_back(token(id));
    } else {
      run.push_back(token(id));
    }
  }
  if (!run.empty()) parts.push_back(tokens_to_string(run));
  std::string text;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) text += ' ';
    text += parts[i];
  }
  if (clean_up.value_or(clean_up_tokenization_spaces_)) clean_up_tokenization(text);
  return text;
}

std::string WordPieceTokenizer::tokens_to_string(const std::vector<std::string>& tokens) const {
  std::string joined;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (i > 0) joined += ' ';
    joined += tokens[i];
  }
  replace_all(joined, " ##", "");
  return tokenizer_detail::python_strip(joined);
}

std::string ByteLevelBpeTokenizer::tokens_to_string(const std::vector<std::string>& tokens) const {
  static const ByteDecoder decoder;
  std::string bytes;
  for (const std::string& token : tokens) {
    if (fast()) {
      // The tokenizers library's ByteLevel decoder: a token with a character outside the byte
      // alphabet (e.g. an added token's) keeps its own UTF-8, whole.
      std::string token_bytes;
      const auto* p = reinterpret_cast<const unsigned char*>(token.data());
      const auto* end = p + token.size();
      bool mapped = true;
      while (p < end && mapped) {
        const char32_t cp = *p < 0x80 ? *p++ : tokenizer_detail::decode_utf8(p, end);
        const int byte = cp < decoder.byte_of.size() ? decoder.byte_of[cp] : -1;
        mapped = byte >= 0;
        token_bytes.push_back(static_cast<char>(byte));
      }
      bytes += mapped ? token_bytes : token;
      continue;
    }
    const auto* p = reinterpret_cast<const unsigned char*>(token.data());
    const auto* end = p + token.size();
    while (p < end) {
      const unsigned char* start = p;
      const char32_t cp = *p < 0x80 ? *p++ : tokenizer_detail::decode_utf8(p, end);
      const int byte = cp < decoder.byte_of.size() ? decoder.byte_of[cp] : -1;
      if (byte >= 0) {
        bytes.push_back(static_cast<char>(byte));
      } else {
        bytes.append(reinterpret_cast<const char*>(start), static_cast<std::size_t>(p - start));
      }
    }
  }
  return tokenizer_detail::utf8_replace_invalid(bytes);
}

bool ByteLevelBpeTokenizer::is_added_id(std::int32_t id) const {
  // The tokenizers library decodes added tokens in line with the others.
  return !fast() && std::binary_search(added_ids_.begin(), added_ids_.end(), id);
}

std::string SentencePieceTokenizer::tokens_to_string(const std::vector<std::string>& tokens) const {
  if (kind_ == TokenizerKind::kDebertaSentencePiece) {
    // SPMTokenizer.decode: spm.decode_pieces of each run of pieces; a special token follows its
    // run directly, after a space unless the token before it was special too; then strip().
    std::string out;
    std::vector<std::string> run;
    bool previous_special = false;
    auto decode_run = [&] {
      std::string text;
      // The pieces are the model's own (token() gave them): decoding cannot fail.
      if (!run.empty() && !sp_->Decode(run, &text).ok()) text.clear();
      run.clear();
      return text;
    };
    for (const std::string& token : tokens) {
      if (std::find(special_strings_.begin(), special_strings_.end(), token) !=
          special_strings_.end()) {
        if (!previous_special) out += ' ';
        out += decode_run();
        out += token;
        previous_special = true;
      } else {
        run.push_back(token);
        previous_special = false;
      }
    }
    out += decode_run();
    return tokenizer_detail::python_strip(out);
  }
  std::string joined;
  for (const std::string& token : tokens) joined += token;
  replace_all(joined, "\u2581", " ");
  return tokenizer_detail::python_strip(joined);
}

bool SentencePieceTokenizer::is_added_id(std::int32_t id) const {
  // DeBERTa: [MASK] and added_tokens.json's tokens, after the pieces.
  if (kind_ == TokenizerKind::kDebertaSentencePiece) return id >= first_added_id_;
  // added_tokens.json's tokens take the ids after <mask> (the fairseq mappings only).
  const auto mask = static_cast<std::int32_t>(spm_to_id_.size()) + offset_;
  return mapping_ != FairseqMapping::kNone && id > mask && id <= max_id_;
}

}  // namespace bertfit
