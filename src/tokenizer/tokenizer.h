// BERT WordPiece tokenizer with Hugging Face BertTokenizer semantics: BasicTokenizer (clean
// text, CJK split, lowercase + strip accents for uncased, whitespace and punctuation split)
// then greedy longest-match WordPiece with "##" continuations; single and pair encoding with
// [CLS]/[SEP], token type ids, attention mask and longest_first truncation.
//
// Text handling, matching transformers 4.28's slow BertTokenizer:
// - The special tokens [CLS] [SEP] [PAD] [UNK] [MASK] written literally in the text are kept
//   whole (case-sensitive, as HF's added-token trie does); "[cls]" is split as punctuation.
// - Invalid UTF-8 never throws: each byte that does not start a valid sequence (stray
//   continuation bytes, bad lead bytes, truncated sequences, overlong forms, surrogates, code
//   points above U+10FFFF) is read as U+FFFD, which cleaning drops like HF drops U+FFFD. The
//   bytes therefore vanish without splitting the word around them.
// - Character categories, case mapping and NFD come from utf8proc (its Unicode version may be
//   newer than the Python that made the golden files: code points unassigned in one and
//   assigned in the other can differ).
// - Thread-safe: const methods may be called concurrently (scratch buffers are per thread).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab_index.h"

namespace bertfit {

struct Encoding {
  std::vector<std::int32_t> input_ids;
  std::vector<std::int32_t> token_type_ids;
  std::vector<std::int32_t> attention_mask;  // all ones (no padding is added here)
  std::int64_t truncated_tokens = 0;         // tokens of a and b cut to fit max_len
};

class WordPieceTokenizer {
 public:
  // vocab.txt: one token per line, id = line number. lowercase: do_lower_case (and strip
  // accents), as bert-base-uncased.
  static WordPieceTokenizer from_vocab_file(const std::string& path, bool lowercase = true);
  // HF tokenizers' tokenizer.json with a WordPiece model (the older format without
  // model.type is accepted); lowercase/strip_accents from its BertNormalizer.
  static WordPieceTokenizer from_tokenizer_json(const std::string& path);
  // A model folder: vocab.txt if present (do_lower_case from tokenizer_config.json, default
  // true), else tokenizer.json. Throws Error naming the folder if neither exists.
  static WordPieceTokenizer from_model_dir(const std::string& dir);

  // Ids of text without special tokens and without truncation.
  std::vector<std::int32_t> tokenize_ids(std::string_view text) const;

  // [CLS] a [SEP] (b [SEP]) truncated to max_len total tokens with HF's longest_first
  // strategy (remove one token at a time from the longer sequence, from b on ties). Throws
  // Error if max_len cannot hold the special tokens (2 for a single text, 3 for a pair). A
  // single text is truncated down to nothing if need be (max_len 2 gives [CLS] [SEP]), where
  // HF would log an error and return it untruncated.
  Encoding encode(std::string_view a, std::optional<std::string_view> b, int max_len) const;
  // The same from already tokenized ids (a, b without special tokens).
  Encoding encode_ids(std::vector<std::int32_t> a, std::optional<std::vector<std::int32_t>> b,
                      int max_len) const;

  int vocab_size() const { return static_cast<int>(vocab_.size()); }
  std::int32_t cls_id() const { return cls_id_; }
  std::int32_t sep_id() const { return sep_id_; }
  std::int32_t pad_id() const { return pad_id_; }
  std::int32_t unk_id() const { return unk_id_; }
  const std::string& token(std::int32_t id) const { return vocab_.at(id); }
  bool lowercase() const { return lowercase_; }

 private:
  struct Options {
    bool lowercase = true;
    bool strip_accents = true;
    int max_input_chars_per_word = 100;
    std::string unk_token = "[UNK]";
    std::string continuation_prefix = "##";
  };
  // Indexes vocab (id -> token), resolves the special tokens; errors name source (the file).
  static WordPieceTokenizer build(std::vector<std::string> vocab, const Options& options,
                                  const std::string& source);
  // Appends the ids of text to out (special tokens in the text kept whole).
  void tokenize_into(std::string_view text, std::vector<std::int32_t>& out) const;
  // The same for text free of literal special tokens.
  void tokenize_chunk(std::string_view text, std::vector<std::int32_t>& out) const;
  // Appends the ids of one word that is already normalized and free of whitespace and
  // punctuation (cps: its length in code points); a single [UNK] if it cannot be matched.
  void wordpiece(std::string_view word, std::size_t cps, std::vector<std::int32_t>& out) const;
  void finish_word(std::string& word, bool ascii, std::vector<std::int32_t>& out) const;

  std::vector<std::string> vocab_;
  tokenizer_detail::VocabIndex index_;
  bool lowercase_ = true;
  bool strip_accents_ = true;
  int max_input_chars_per_word_ = 100;
  std::int32_t cls_id_ = -1, sep_id_ = -1, pad_id_ = -1, unk_id_ = -1, mask_id_ = -1;
  std::array<std::int32_t, 128> ascii_punct_id_{};  // id of each ASCII punctuation word
};

}  // namespace bertfit
