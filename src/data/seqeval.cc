// seqeval's default-mode chunking and scores (see seqeval.h). The chunker is seqeval's
// get_entities loop fed one tag at a time, so one sentence (tag_entities) and a list of
// sentences joined by "O" (seqeval_scores) run the same code.
#include "data/seqeval.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string_view>
#include <tuple>

#include "base/error.h"

namespace bertfit {
namespace {

constexpr std::string_view kNoType = "_";

// A tag split as seqeval splits it: its first character and the type after the next '-'.
struct Tag {
  char prefix = 'O';  // a non-ASCII first character keeps its lead byte: it equals no letter
  std::string_view type = kNoType;
};

constexpr Tag kOutside{'O', kNoType};

// Bytes of the UTF-8 character that starts s (non-empty): seqeval's chunk[0] is a character.
std::size_t first_char_bytes(std::string_view s) {
  const auto lead = static_cast<unsigned char>(s[0]);
  const std::size_t n = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  return std::min(n, s.size());
}

// seqeval: tag = chunk[0]; type = chunk[1:].split('-', maxsplit=1)[-1] or '_'. The view points
// into s, which outlives the chunking.
Tag parse_tag(std::string_view s) {
  const std::string_view rest = s.substr(first_char_bytes(s));
  const std::size_t dash = rest.find('-');
  const std::string_view type = dash == std::string_view::npos ? rest : rest.substr(dash + 1);
  return {s[0], type.empty() ? kNoType : type};
}

// seqeval's end_of_chunk: a chunk ended between prev and tag.
bool ends_chunk(const Tag& prev, const Tag& tag) {
  const char p = prev.prefix, t = tag.prefix;
  if (p == 'E' || p == 'S') return true;
  if ((p == 'B' || p == 'I') && (t == 'B' || t == 'S' || t == 'O')) return true;
  return p != 'O' && p != '.' && prev.type != tag.type;
}

// seqeval's start_of_chunk: a chunk starts at tag.
bool starts_chunk(const Tag& prev, const Tag& tag) {
  const char p = prev.prefix, t = tag.prefix;
  if (t == 'B' || t == 'S') return true;
  if ((p == 'E' || p == 'S' || p == 'O') && (t == 'E' || t == 'I')) return true;
  return t != 'O' && t != '.' && prev.type != tag.type;
}

// The state of seqeval's get_entities loop. A chunk that started and never ended is forgotten;
// a chunk can end without a start since the last one (e.g. "X" then "I-PER" ends a "_" chunk),
// and then it begins where the last start was, as in seqeval.
class Chunker {
 public:
  // Feeds the tag at `position`; appends the chunk that ended just before it, if any.
  void feed(const Tag& tag, std::int64_t position, std::vector<TagEntity>& out) {
    if (ends_chunk(prev_, tag)) out.push_back({std::string(prev_.type), begin_, position});
    if (starts_chunk(prev_, tag)) begin_ = position;
    prev_ = tag;
  }

 private:
  Tag prev_ = kOutside;
  std::int64_t begin_ = 0;
};

// True, predicted and matching entities of one type (or of all).
struct Counts {
  std::int64_t truth = 0, predicted = 0, matched = 0;
};

// seqeval's _prf_divide with zero_division "warn" (0), and F-beta with beta = 1:
// (1 + beta^2) P R / (beta^2 P + R), 0 when the denominator is 0. Written in seqeval's order of
// operations so that the results are the same doubles.
void score(const Counts& c, double& precision, double& recall, double& f1) {
  precision =
      c.predicted == 0 ? 0.0 : static_cast<double>(c.matched) / static_cast<double>(c.predicted);
  recall = c.truth == 0 ? 0.0 : static_cast<double>(c.matched) / static_cast<double>(c.truth);
  const double denominator = precision + recall;
  f1 = denominator == 0 ? 0.0 : 2.0 * precision * recall / denominator;
}

}  // namespace

std::vector<TagEntity> tag_entities(std::span<const std::string> tags) {
  std::vector<TagEntity> entities;
  Chunker chunker;
  for (std::size_t i = 0; i < tags.size(); ++i) {
    if (tags[i].empty()) throw_error("seqeval: the tag of token ", i, " is empty");
    chunker.feed(parse_tag(tags[i]), static_cast<std::int64_t>(i), entities);
  }
  chunker.feed(kOutside, static_cast<std::int64_t>(tags.size()), entities);  // seqeval's seq+['O']
  return entities;
}

SeqevalScores seqeval_scores(std::span<const std::vector<std::string>> truth,
                             std::span<const std::vector<std::string>> predicted) {
  if (truth.size() != predicted.size()) {
    throw_error("seqeval: ", truth.size(), " true sentences but ", predicted.size(),
                " predicted ones");
  }
  // Positions in seqeval's flattened sequence: every sentence followed by an "O". (Its final
  // extra "O" changes nothing after that one.)
  std::vector<TagEntity> true_entities, predicted_entities;
  Chunker true_chunker, predicted_chunker;
  std::int64_t position = 0, tokens = 0, correct = 0;
  for (std::size_t s = 0; s < truth.size(); ++s) {
    const std::vector<std::string>&true_tags = truth[s], &predicted_tags = predicted[s];
    if (true_tags.size() != predicted_tags.size()) {
      throw_error("seqeval: sentence ", s, " has ", true_tags.size(), " true tags but ",
                  predicted_tags.size(), " predicted ones");
    }
    for (std::size_t i = 0; i < true_tags.size(); ++i, ++position) {
      if (true_tags[i].empty() || predicted_tags[i].empty()) {
        throw_error("seqeval: sentence ", s, " has an empty ",
                    true_tags[i].empty() ? "true" : "predicted", " tag at token ", i);
      }
      true_chunker.feed(parse_tag(true_tags[i]), position, true_entities);
      predicted_chunker.feed(parse_tag(predicted_tags[i]), position, predicted_entities);
      correct += true_tags[i] == predicted_tags[i];
    }
    tokens += static_cast<std::int64_t>(true_tags.size());
    true_chunker.feed(kOutside, position, true_entities);
    predicted_chunker.feed(kOutside, position, predicted_entities);
    ++position;
  }

  // Entities match when type, begin and end are equal; each position ends at most one chunk,
  // so neither list holds duplicates.
  std::set<std::tuple<std::string_view, std::int64_t, std::int64_t>> true_set;
  std::map<std::string, Counts, std::less<>> per_type;
  Counts all;
  for (const TagEntity& e : true_entities) {
    true_set.emplace(e.type, e.begin, e.end);
    ++per_type[e.type].truth;
    ++all.truth;
  }
  for (const TagEntity& e : predicted_entities) {
    Counts& c = per_type[e.type];
    ++c.predicted;
    ++all.predicted;
    if (true_set.contains({e.type, e.begin, e.end})) {
      ++c.matched;
      ++all.matched;
    }
  }

  SeqevalScores scores;
  score(all, scores.precision, scores.recall, scores.f1);
  scores.accuracy = tokens == 0 ? std::numeric_limits<double>::quiet_NaN()
                                : static_cast<double>(correct) / static_cast<double>(tokens);
  for (const auto& [type, counts] : per_type) {  // std::map: sorted by type, bytewise
    EntityTypeScores& t = scores.types.emplace_back();
    t.type = type;
    t.support = counts.truth;
    score(counts, t.precision, t.recall, t.f1);
  }
  return scores;
}

}  // namespace bertfit
