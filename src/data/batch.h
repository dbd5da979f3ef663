// Encoding examples into token ids and packing them into padded (B,T) batches, B rows and T
// tokens, row-major. Padding is on the right with id pad_id (0), token type 0 and mask 0,
// as HF's DataCollatorWithPadding for BERT tokenizers.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "data/example.h"
#include "data/tagged.h"
#include "tokenizer/tokenizer.h"

namespace bertfit {

struct EncodedExample {
  std::vector<std::int32_t> ids;       // [CLS] a [SEP] (b [SEP]), at most max_len
  std::vector<std::int32_t> type_ids;  // 0 for a, 1 for b
  float label = 0.0f;
  std::vector<std::int32_t> label_ids;  // multi-label: the class ids present
  std::int64_t truncated_tokens = 0;    // tokens cut to fit max_len
  // Token classification (encode_tagged), one entry per id: the tag id on each word's first
  // sub-token (-1 when the data is unlabeled: the positions to predict), -100 on the other
  // sub-tokens and on special tokens, as run_ner with label_all_tokens=False.
  std::vector<std::int32_t> token_labels = {};
  std::vector<std::int32_t> word_ids = {};  // the word index of each token; -1 on special tokens
  std::int64_t truncated_words = 0;         // words cut to fit max_len (whole words only)
};

// How much truncation cut: rows that lost tokens and the tokens they lost.
struct Truncation {
  std::int64_t rows = 0, tokens = 0;
};
Truncation count_truncation(const std::vector<EncodedExample>& encoded);

// Encodes every example with tokenizer.encode(text_a, text_b, max_len) (truncation
// longest_first), in parallel. Errors name the example's line.
std::vector<EncodedExample> encode_examples(const Tokenizer& tokenizer,
                                            const std::vector<Example>& examples, int max_len);

// Encodes tagged sentences for token classification, in parallel: each word tokenized alone
// (tokenize_word_into, as is_split_into_words=True), the runs joined in the single-sequence
// template with type ids 0, the tags mapped to their positions in label_names. Truncation keeps
// whole words: the longest prefix of words whose sub-tokens fit in max_len minus the template's
// specials; the rest count in truncated_words (and their sub-tokens in truncated_tokens). A word
// with no sub-tokens (only characters the tokenizer drops) has no position, as in run_ner.
// Errors: max_len < 2; a tag not in label_names, naming FILE:LINE of the word.
std::vector<EncodedExample> encode_tagged(const Tokenizer& tokenizer, const LoadedTagged& data,
                                          const std::vector<std::string>& label_names, int max_len);

struct Batch {
  int B = 0, T = 0;
  std::vector<std::int32_t> input_ids;       // (B,T)
  std::vector<std::int32_t> token_type_ids;  // (B,T)
  std::vector<std::int32_t> attention_mask;  // (B,T): 1 for tokens, 0 for padding
  // (B), or multi-label (B,K) multi-hot rows, or token labels (B,T) (BatchOptions)
  std::vector<float> labels;
  std::vector<std::int64_t> example_index;  // (B): the index into `encoded` of each row
};

struct BatchOptions {
  // Dynamic padding: T = the longest row rounded up to a multiple of this (1: no rounding).
  int pad_to_multiple_of = 8;
  // > 0: pad every batch to exactly this length (HF run_glue's --pad_to_max_length); every
  // row must fit.
  int fixed_len = 0;
  // > 0: dynamic padding rounds up to at most this length (the model's max positions).
  int max_len = 0;
  std::int32_t pad_id = 0;
  // > 0: multi-label with this many classes: labels are (B,K) rows of 0/1 from label_ids.
  int multi_label_classes = 0;
  // Token classification: labels are (B,T), each row's token_labels then -100 on padding.
  bool token_labels = false;
};

// Packs encoded[indices[0..B)] into one batch (indices non-empty).
Batch make_batch(const std::vector<EncodedExample>& encoded, std::span<const std::int64_t> indices,
                 const BatchOptions& options = {});

}  // namespace bertfit
