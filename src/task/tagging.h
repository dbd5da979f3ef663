// Token classification's answers for one input: each word's tag and the entities, from the
// model's per-token logits, as transformers' token-classification pipeline forms them
// (task/entities.h). Inputs are pre-split words (CoNLL, tagged JSONL: encoded as training
// encodes them, each word alone) or raw text (tokenized with offsets; words are the pipeline's:
// a token and the subword tokens after it).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/tagged.h"
#include "task/entities.h"
#include "tokenizer/tokenizer.h"

namespace bertfit {

// One input of a token classifier, encoded.
struct TextToTag {
  std::string text;                // what the entities' offsets index: raw text, or the words
                                   // joined by single spaces
  std::vector<std::string> words;  // pre-split words (empty for raw text)
  EncodedExample encoded;          // the model's input (token_labels: -1 on each word's first
                                   // sub-token for pre-split words)
  // Per token: characters [begin, end) of `text`; special tokens {0, 0}. A pre-split word's
  // sub-tokens each span the whole word (the tokenizer splits each word alone).
  std::vector<TokenOffset> spans;
  std::vector<bool> special;  // per token: a template token ([CLS], </s>, ...)
};

// Pre-split words (unlabeled LoadedTagged), encoded as encode_tagged does (whole-word
// truncation at max_len).
std::vector<TextToTag> texts_from_words(const Tokenizer& tokenizer, const LoadedTagged& data,
                                        int max_len);
// Raw texts, each tokenized with offsets as one sequence of the template, cut at max_len.
std::vector<TextToTag> texts_from_raw(const Tokenizer& tokenizer,
                                      const std::vector<std::string>& texts, int max_len);
// One raw text from its encoding as a single sequence of the template, with offsets (each
// token's bytes in text; Tokenizer::encode's with_offsets).
TextToTag text_from_encoding(std::string text, const Encoding& encoding);

struct Tagging {
  std::vector<std::string> words;  // pre-split: the input's; raw text: the pipeline's words
  std::vector<std::string> tags;   // per word: its first token's argmax; "" for a word cut off
                                   // by truncation (or that has no token)
  std::vector<Entity> entities;
  std::int64_t cut_words = 0;  // pre-split words cut by truncation
};

// The answer for one input from its tokens' logits (rows of K = id2label.size(), one per token
// of t.encoded.ids). The pipeline's subword rule follows the tokenizer's kind (WordPiece: the
// "##" prefix; byte-level BPE and SentencePiece: spaces), unk tokens never being subwords.
Tagging tag_text(const TextToTag& t, const float* logits, const std::vector<std::string>& id2label,
                 const Tokenizer& tokenizer, Aggregation how);

// An entity as transformers' pipeline answers it: {"entity_group", "score", "word", "start",
// "end"}, or for Aggregation::kNone {"entity", "score", "index", "word", "start", "end"}.
nlohmann::json entity_json(const Entity& e, Aggregation how);

}  // namespace bertfit
