// Token classification's per-input answers (see tagging.h).
#include "task/tagging.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"

namespace bertfit {
namespace {

std::vector<float> softmax(const float* row, std::size_t K) {
  std::vector<float> p(K);
  const float mx = *std::max_element(row, row + K);
  double sum = 0;
  for (std::size_t k = 0; k < K; ++k) sum += p[k] = std::exp(row[k] - mx);
  for (float& v : p) v = static_cast<float>(v / sum);
  return p;
}

std::size_t argmax(const float* row, std::size_t K) {
  return static_cast<std::size_t>(std::max_element(row, row + K) - row);
}

// Code points of a UTF-8 string.
std::int64_t char_count(std::string_view s) { return Utf8Chars(s).size(); }

}  // namespace

std::vector<TextToTag> texts_from_words(const Tokenizer& tokenizer, const LoadedTagged& data,
                                        int max_len) {
  std::vector<EncodedExample> encoded = encode_tagged(tokenizer, data, {}, max_len);
  std::vector<TextToTag> out(encoded.size());
  for (std::size_t i = 0; i < encoded.size(); ++i) {
    TextToTag& t = out[i];
    t.words = data.sentences[i].words;
    std::vector<std::int64_t> word_start(t.words.size());
    std::int64_t at = 0;
    for (std::size_t w = 0; w < t.words.size(); ++w) {
      if (w > 0) {
        t.text += ' ';
        ++at;
      }
      word_start[w] = at;
      t.text += t.words[w];
      at += char_count(t.words[w]);
    }
    t.encoded = std::move(encoded[i]);
    for (std::int32_t w : t.encoded.word_ids) {
      t.special.push_back(w < 0);
      if (w < 0) {
        t.spans.push_back({0, 0});
        continue;
      }
      const std::int64_t begin = word_start[w];
      t.spans.push_back({static_cast<std::uint32_t>(begin),
                         static_cast<std::uint32_t>(begin + char_count(t.words[w]))});
    }
  }
  return out;
}

std::vector<TextToTag> texts_from_raw(const Tokenizer& tokenizer,
                                      const std::vector<std::string>& texts, int max_len) {
  std::vector<TextToTag> out;
  out.reserve(texts.size());
  for (const std::string& text : texts) {
    const Encoding e = tokenizer.encode(text, std::nullopt, max_len, /*with_offsets=*/true);
    out.push_back(text_from_encoding(text, e));
  }
  return out;
}

TextToTag text_from_encoding(std::string text, const Encoding& e) {
  CHECK(e.offsets.size() == e.input_ids.size(), "an encoding of ", e.input_ids.size(),
        " tokens with ", e.offsets.size(), " offsets");
  TextToTag t;
  t.text = std::move(text);
  t.encoded.ids = e.input_ids;
  t.encoded.type_ids = e.token_type_ids;
  t.encoded.truncated_tokens = e.truncated_tokens;
  t.spans = byte_to_char_offsets(t.text, e.offsets);
  // The template's tokens are the first and the last (a single text: [CLS] A [SEP]).
  t.special.assign(t.encoded.ids.size(), false);
  if (!t.special.empty()) t.special.front() = t.special.back() = true;
  return t;
}

Tagging tag_text(const TextToTag& t, const float* logits, const std::vector<std::string>& id2label,
                 const Tokenizer& tokenizer, Aggregation how) {
  const std::size_t K = id2label.size(), n = t.encoded.ids.size();
  CHECK(t.spans.size() == n && t.special.size() == n, "tagging input of ", n, " tokens");
  const Utf8Chars chars(t.text);
  const bool pre_split = !t.words.empty() || !t.encoded.word_ids.empty();
  std::vector<TokenScores> tokens;
  Tagging out;
  if (pre_split) {
    out.words = t.words;
    out.tags.assign(t.words.size(), "");
  }
  std::int32_t previous_word = -1;
  std::int64_t word_begin = 0;  // raw text: where the current word starts
  for (std::size_t j = 0; j < n; ++j) {
    if (t.special[j]) continue;
    const float* row = logits + j * K;
    TokenScores s;
    s.probs = softmax(row, K);
    s.start = t.spans[j].begin;
    s.end = t.spans[j].end;
    s.index = static_cast<std::int64_t>(j);
    const bool unk = t.encoded.ids[j] == tokenizer.unk_id();
    if (pre_split) {
      const std::int32_t w = t.encoded.word_ids[j];
      s.is_subword = w == previous_word;
      if (!s.is_subword) out.tags[w] = id2label[argmax(row, K)];
      previous_word = w;
    } else if (tokenizer.kind() == TokenizerKind::kWordPiece) {
      s.is_subword =
          is_subword_by_prefix(tokenizer.token(t.encoded.ids[j]), chars, s.start, s.end, unk);
    } else {
      s.is_subword = is_subword_by_spaces(chars, s.start, unk);
    }
    if (!pre_split) {
      // The pipeline's words: a token and the subword tokens after it.
      if (!s.is_subword || out.words.empty()) {
        word_begin = s.start;
        out.words.emplace_back(chars.slice(s.start, s.end));
        out.tags.push_back(id2label[argmax(row, K)]);
      } else {
        out.words.back() = std::string(chars.slice(word_begin, s.end));
      }
    }
    tokens.push_back(std::move(s));
  }
  out.cut_words = t.encoded.truncated_words;
  out.entities = aggregate_entities(tokens, id2label, how, t.text);
  return out;
}

nlohmann::json entity_json(const Entity& e, Aggregation how) {
  nlohmann::json j;
  if (how == Aggregation::kNone) {
    j = {{"entity", e.entity}, {"score", e.score}, {"index", e.index}};
  } else {
    j = {{"entity_group", e.entity_group}, {"score", e.score}};
  }
  j["word"] = e.word;
  j["start"] = e.start;
  j["end"] = e.end;
  return j;
}

}  // namespace bertfit
