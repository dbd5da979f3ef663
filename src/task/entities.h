// Token-classification entities: the per-token tag probabilities of one text grouped into
// entities as transformers 4.28.1's TokenClassificationPipeline does (gather_pre_entities'
// subword decision, aggregate / aggregate_words / aggregate_word, group_entities /
// group_sub_entities / get_tag, and postprocess's ignore_labels filter), for the five
// aggregation strategies. Pure: no model, no tokenizer, no I/O.
//
// Offsets are CHARACTER offsets (Unicode code points), as HF's fast tokenizers report them
// (tokenizer.h's byte_to_char_offsets gives them). The text is UTF-8; a byte that does not
// start a valid UTF-8 sequence counts as one character, as in byte_to_char_offsets.
//
// One deliberate difference from HF: an entity's `word` is the text's characters
// [start, end), so text[start:end] == word always holds (HF decodes the tokens instead, which
// lower-cases for uncased models, drops accents and rewrites spaces).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bertfit {

// transformers' AggregationStrategy: kNone reports every token, the others group tokens into
// entities; kFirst, kAverage and kMax first force one tag per word (a word is a token and the
// subword tokens that follow it).
enum class Aggregation { kNone, kSimple, kFirst, kAverage, kMax };

// "none", "simple", "first", "average", "max"; nullopt for anything else.
std::optional<Aggregation> parse_aggregation(std::string_view name);
const char* aggregation_name(Aggregation how);

// The code points of a UTF-8 text and where each starts: character i is the bytes
// [byte_at(i), byte_at(i + 1)).
class Utf8Chars {
 public:
  explicit Utf8Chars(std::string_view text);
  std::int64_t size() const { return static_cast<std::int64_t>(starts_.size()) - 1; }
  // Python's text[start:end] on the characters: bounds are clamped to [0, size()], an empty
  // view when end <= start.
  std::string_view slice(std::int64_t start, std::int64_t end) const;

 private:
  std::string_view text_;
  std::vector<std::size_t> starts_;  // size() + 1 entries, the last is text_.size()
};

// Whether a token continues the previous token's word (the pipeline's is_subword), decided by
// the tokenizer's kind as gather_pre_entities decides it. A token whose id is the unk id is
// never a subword (is_unk).
//  - by_prefix: for a tokenizer whose model has a continuing-subword prefix (WordPiece's "##"):
//    the token's string and its text differ in length in characters ("##ing" vs "ing").
//  - by_spaces: HF's fallback for the others (byte-level BPE, SentencePiece): the token does
//    not start the text and no ' ' is in text[start-1:start+1].
bool is_subword_by_prefix(std::string_view token, const Utf8Chars& text, std::int64_t start,
                          std::int64_t end, bool is_unk);
bool is_subword_by_spaces(const Utf8Chars& text, std::int64_t start, bool is_unk);

// One non-special token of the input, in order.
struct TokenScores {
  std::vector<float> probs;         // softmax over the K tags (the pipeline's scores)
  std::int64_t start = 0, end = 0;  // characters [start, end) of the text
  bool is_subword = false;          // continues the previous token's word (is_subword_by_*)
  std::int64_t index = -1;          // position in the model's input (special tokens count)
};

struct Entity {
  std::string entity;        // kNone: the token's tag ("B-PER"); empty otherwise
  std::string entity_group;  // the other strategies: the group's type ("PER"); empty for kNone
  double score = 0;          // kNone, kSimple: the tag's probability; else see aggregate_entities
  std::string word;          // the text's characters [start, end)
  std::int64_t start = 0, end = 0;
  std::int64_t index = -1;  // kNone: the token's TokenScores::index; -1 otherwise
};

// The entities of one text, as the pipeline's postprocess gives them for one chunk:
//  - kNone: one per token, its argmax tag and probability;
//  - kSimple: tokens tagged by their argmax, then grouped;
//  - kFirst / kAverage / kMax: one tag per word first (the first token's argmax; the argmax
//    of the mean probabilities; the argmax of the token holding the largest probability),
//    then grouped.
// Grouping joins a token (or word) to the previous group when its type (the tag without
// "B-"/"I-"; a tag with neither counts as "I-" + tag) equals the previous one's and it is not
// "B-"; a group's entity_group is its first tag after the last '-', its score the mean of its
// members' scores, its span from the first member's start to the last's end. Then entities
// whose entity (kNone) or entity_group is in ignore_labels are dropped. Argmax ties go to the
// lowest tag id (numpy's). CHECKs that every token has id2label.size() probabilities.
std::vector<Entity> aggregate_entities(const std::vector<TokenScores>& tokens,
                                       const std::vector<std::string>& id2label, Aggregation how,
                                       std::string_view text,
                                       const std::vector<std::string>& ignore_labels = {"O"});

}  // namespace bertfit
