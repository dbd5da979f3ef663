// Token-classification entities as transformers' TokenClassificationPipeline groups them
// (entities.h). Each function below names the pipeline method it follows.
#include "task/entities.h"

#include <algorithm>
#include <utility>

#include "base/check.h"

namespace bertfit {
namespace {

bool is_cont(unsigned char c) { return (c & 0xC0) == 0x80; }

// Bytes of the UTF-8 sequence starting at p, or 1 for a byte that starts no valid sequence
// (the rule of the tokenizers' decode_utf8: no overlongs, surrogates or code points above
// U+10FFFF).
std::size_t utf8_length(const unsigned char* p, std::size_t avail) {
  const unsigned char c = p[0];
  if (c >= 0xC2 && c <= 0xDF) {
    if (avail >= 2 && is_cont(p[1])) return 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    const unsigned char lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    if (avail >= 3 && p[1] >= lo && p[1] <= hi && is_cont(p[2])) return 3;
  } else if (c >= 0xF0 && c <= 0xF4) {
    const unsigned char lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    if (avail >= 4 && p[1] >= lo && p[1] <= hi && is_cont(p[2]) && is_cont(p[3])) return 4;
  }
  return 1;
}

// numpy's argmax: the first of the largest.
std::size_t argmax(const std::vector<float>& v) {
  return static_cast<std::size_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// A token or a word with its tag, before grouping (the pipeline's per-token "entity" dicts).
struct Tagged {
  std::size_t tag;
  double score;
  std::int64_t start, end, index;
};

Tagged tag_token(const TokenScores& t) {
  const std::size_t k = argmax(t.probs);
  return {k, t.probs[k], t.start, t.end, t.index};
}

// aggregate_word: one tag for the tokens [first, last) of a word.
Tagged tag_word(const std::vector<TokenScores>& tokens, std::size_t first, std::size_t last,
                Aggregation how) {
  Tagged w{0, 0, tokens[first].start, tokens[last - 1].end, -1};
  if (how == Aggregation::kFirst) {
    w.tag = argmax(tokens[first].probs);
    w.score = tokens[first].probs[w.tag];
  } else if (how == Aggregation::kMax) {
    // max(entities, key=scores.max()): the first token holding the largest probability.
    std::size_t best = first;
    float best_max = *std::max_element(tokens[first].probs.begin(), tokens[first].probs.end());
    for (std::size_t i = first + 1; i < last; ++i) {
      const float m = *std::max_element(tokens[i].probs.begin(), tokens[i].probs.end());
      if (m > best_max) best = i, best_max = m;
    }
    w.tag = argmax(tokens[best].probs);
    w.score = tokens[best].probs[w.tag];
  } else {
    CHECK(how == Aggregation::kAverage, "word aggregation needs first, average or max");
    // np.nanmean over the stacked float32 rows: a float32 sum row by row, divided by the count.
    std::vector<float> mean(tokens[first].probs.size(), 0.0f);
    for (std::size_t i = first; i < last; ++i) {
      for (std::size_t k = 0; k < mean.size(); ++k) mean[k] += tokens[i].probs[k];
    }
    for (float& m : mean) m /= static_cast<float>(last - first);
    w.tag = argmax(mean);
    w.score = mean[w.tag];
  }
  return w;
}

// aggregate_words: a word is a token and the subword tokens that follow it (the first token
// starts a word whatever its is_subword).
std::vector<Tagged> tag_words(const std::vector<TokenScores>& tokens, Aggregation how) {
  std::vector<Tagged> words;
  std::size_t first = 0;
  for (std::size_t i = 1; i <= tokens.size(); ++i) {
    if (i == tokens.size() || !tokens[i].is_subword) {
      words.push_back(tag_word(tokens, first, i, how));
      first = i;
    }
  }
  return words;
}

// get_tag: ("B", type) for "B-type", ("I", type) for "I-type", ("I", tag) for anything else.
std::pair<char, std::string_view> split_tag(std::string_view tag) {
  if (tag.starts_with("B-")) return {'B', tag.substr(2)};
  if (tag.starts_with("I-")) return {'I', tag.substr(2)};
  return {'I', tag};
}

// group_entities / group_sub_entities over members [first, last).
Entity make_group(const std::vector<Tagged>& members, std::size_t first, std::size_t last,
                  const std::vector<std::string>& id2label, const Utf8Chars& chars) {
  const std::string& tag = id2label[members[first].tag];
  Entity e;
  e.entity_group = tag.substr(tag.rfind('-') == std::string::npos ? 0 : tag.rfind('-') + 1);
  double sum = 0;
  for (std::size_t i = first; i < last; ++i) sum += members[i].score;
  e.score = sum / static_cast<double>(last - first);
  e.start = members[first].start;
  e.end = members[last - 1].end;
  e.word = std::string(chars.slice(e.start, e.end));
  return e;
}

std::vector<Entity> group(const std::vector<Tagged>& members,
                          const std::vector<std::string>& id2label, const Utf8Chars& chars) {
  std::vector<Entity> groups;
  std::size_t first = 0;
  for (std::size_t i = 1; i <= members.size(); ++i) {
    if (i < members.size()) {
      const auto [bi, type] = split_tag(id2label[members[i].tag]);
      const auto [last_bi, last_type] = split_tag(id2label[members[i - 1].tag]);
      if (type == last_type && bi != 'B') continue;
    }
    groups.push_back(make_group(members, first, i, id2label, chars));
    first = i;
  }
  return groups;
}

bool ignored(const std::string& label, const std::vector<std::string>& ignore_labels) {
  return std::find(ignore_labels.begin(), ignore_labels.end(), label) != ignore_labels.end();
}

}  // namespace

std::optional<Aggregation> parse_aggregation(std::string_view name) {
  for (Aggregation how : {Aggregation::kNone, Aggregation::kSimple, Aggregation::kFirst,
                          Aggregation::kAverage, Aggregation::kMax}) {
    if (name == aggregation_name(how)) return how;
  }
  return std::nullopt;
}

const char* aggregation_name(Aggregation how) {
  switch (how) {
    case Aggregation::kNone:
      return "none";
    case Aggregation::kSimple:
      return "simple";
    case Aggregation::kFirst:
      return "first";
    case Aggregation::kAverage:
      return "average";
    case Aggregation::kMax:
      return "max";
  }
  return "?";
}

Utf8Chars::Utf8Chars(std::string_view text) : text_(text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  std::size_t at = 0;
  while (at < text.size()) {
    starts_.push_back(at);
    at += utf8_length(p + at, text.size() - at);
  }
  starts_.push_back(text.size());
}

std::string_view Utf8Chars::slice(std::int64_t start, std::int64_t end) const {
  start = std::clamp<std::int64_t>(start, 0, size());
  end = std::clamp<std::int64_t>(end, 0, size());
  if (end <= start) return {};
  return text_.substr(starts_[start], starts_[end] - starts_[start]);
}

bool is_subword_by_prefix(std::string_view token, const Utf8Chars& text, std::int64_t start,
                          std::int64_t end, bool is_unk) {
  if (is_unk) return false;
  // len(word) != len(word_ref), both in characters.
  return Utf8Chars(token).size() != Utf8Chars(text.slice(start, end)).size();
}

bool is_subword_by_spaces(const Utf8Chars& text, std::int64_t start, bool is_unk) {
  if (is_unk) return false;
  return start > 0 && text.slice(start - 1, start + 1).find(' ') == std::string_view::npos;
}

std::vector<Entity> aggregate_entities(const std::vector<TokenScores>& tokens,
                                       const std::vector<std::string>& id2label, Aggregation how,
                                       std::string_view text,
                                       const std::vector<std::string>& ignore_labels) {
  for (const TokenScores& t : tokens) {
    CHECK(t.probs.size() == id2label.size(), "a token has ", t.probs.size(), " probabilities for ",
          id2label.size(), " labels");
  }
  const Utf8Chars chars(text);
  std::vector<Entity> out;
  if (tokens.empty()) return out;
  CHECK(!id2label.empty(), "token classification without labels");
  if (how == Aggregation::kNone) {
    for (const TokenScores& t : tokens) {
      const Tagged tagged = tag_token(t);
      if (ignored(id2label[tagged.tag], ignore_labels)) continue;
      Entity e;
      e.entity = id2label[tagged.tag];
      e.score = tagged.score;
      e.start = t.start;
      e.end = t.end;
      e.word = std::string(chars.slice(t.start, t.end));
      e.index = t.index;
      out.push_back(std::move(e));
    }
    return out;
  }
  std::vector<Tagged> members;
  if (how == Aggregation::kSimple) {
    for (const TokenScores& t : tokens) members.push_back(tag_token(t));
  } else {
    members = tag_words(tokens, how);
  }
  for (Entity& e : group(members, id2label, chars)) {
    if (!ignored(e.entity_group, ignore_labels)) out.push_back(std::move(e));
  }
  return out;
}

}  // namespace bertfit
