// Entity-level metrics of token classification with the semantics of seqeval 1.2.2 in its
// default (conlleval-compatible) mode, as transformers' run_ner reports them through evaluate's
// "seqeval" metric: micro precision, recall and F1 over exactly matching entities, the same per
// entity type, and token accuracy (eval_precision, eval_recall, eval_f1, eval_accuracy).
//
// Chunking (seqeval's get_entities with suffix=False): a tag's first character is its prefix
// and the type is what follows the first '-' after it ("B-PER" -> B, PER; "B-PER-X" -> B,
// PER-X; "PER" -> P, ER), or "_" when that is empty ("O", "B", "I-"). One rule set covers IOB1,
// IOB2 and BIOES, and any other tag: a chunk ends before a tag when the previous prefix is E or
// S, when B or I is followed by B, S or O, or when a prefix other than O and '.' changes type; a
// chunk starts at B and S, at I or E after O, E or S, and at a type change to a prefix other
// than O and '.'. So "I-PER" after "O" starts an entity (IOB1), "B-PER I-LOC" is two entities,
// and a chunk that has started but was never closed (e.g. "B-PER .-PER O") is dropped, as
// seqeval drops it. Sentences are chunked as seqeval chunks a list of them: flattened with an
// "O" after each, so no entity crosses a sentence boundary.
//
// Scores (seqeval's classification_report, zero_division "warn" acting as 0): precision is 0
// when nothing of a type (or nothing at all) is predicted, recall 0 when nothing is true, F1
// 2PR/(P+R) or 0 when P+R is 0; per type over the types present in either truth or predictions.
// Accuracy is the fraction of equal tags over all tokens; NaN when there are no tokens (seqeval
// divides by zero there).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace bertfit {

// An entity of type `type` on tag indices [begin, end).
struct TagEntity {
  std::string type;
  std::int64_t begin = 0, end = 0;
  friend bool operator==(const TagEntity&, const TagEntity&) = default;
};

// seqeval's default-mode chunks of one sentence's tags ("O", "B-PER", "I-PER", "E-PER", "S-PER",
// bare "B", "I", ... as above), in the order their ends appear. Error for an empty tag.
std::vector<TagEntity> tag_entities(std::span<const std::string> tags);

struct EntityTypeScores {
  std::string type;
  double precision = 0, recall = 0, f1 = 0;
  std::int64_t support = 0;  // true entities of the type (seqeval's "support", evaluate's "number")
};

struct SeqevalScores {
  double precision = 0, recall = 0, f1 = 0, accuracy = 0;
  std::vector<EntityTypeScores> types;  // sorted by type (byte order = code point order)
};

// truth[i] and predicted[i] are sentence i's tags. Error when the counts of sentences or the
// lengths of a sentence differ (naming the sentence), or for an empty tag.
SeqevalScores seqeval_scores(std::span<const std::vector<std::string>> truth,
                             std::span<const std::vector<std::string>> predicted);

}  // namespace bertfit
