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
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_index.h"

namespace bertfit {

class WordPieceTokenizer final : public Tokenizer {
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

  // Offsets: each token's own source bytes, as Hugging Face's fast tokenizer aligns them: from
  // the first to the last source code point its normalized code points came from (a code point
  // removed by cleaning or accent stripping at a token's edge is not in it); a word that becomes
  // [UNK] spans the whole pre-tokenized word (a piece between spaces and punctuation).
  void tokenize_into(std::string_view text, std::vector<std::int32_t>& ids,
                     std::vector<TokenOffset>* offsets) const override;
  std::string token(std::int32_t id) const override { return vocab_.at(id); }
  bool lowercase() const { return lowercase_; }

 protected:
  // BertTokenizer's: joined by spaces, " ##" glued, stripped.
  std::string tokens_to_string(const std::vector<std::string>& tokens) const override;

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
  WordPieceTokenizer() : Tokenizer(TokenizerKind::kWordPiece, PairTemplate::kBert) {}
  // Output of one tokenize_into call: ids, and offsets (null when not wanted) shifted by base.
  struct Sink {
    std::vector<std::int32_t>& ids;
    std::vector<TokenOffset>* offsets;
    std::uint32_t base;
  };
  // Text free of literal special tokens.
  template <bool kOffsets>
  void tokenize_chunk(std::string_view text, Sink& out) const;
  // Where a word's bytes came from: byte i of the word is part of source code point origin[i],
  // which is the source bytes [begin[origin[i]], end[origin[i]]) of the chunk.
  struct SourceMap {
    const std::uint32_t* origin;
    const std::uint32_t* begin;
    const std::uint32_t* end;
  };
  // Appends the ids of one word that is already normalized and free of whitespace and
  // punctuation (cps: its length in code points); a single [UNK] if it cannot be matched.
  template <bool kOffsets>
  void wordpiece(std::string_view word, std::size_t cps, Sink& out, const SourceMap& source) const;
  // Tokenizes the word gathered so far (its source code points in the scratch buffers), then
  // clears it.
  template <bool kOffsets>
  void finish_word(std::string& word, bool ascii, Sink& out) const;

  std::vector<std::string> vocab_;
  tokenizer_detail::VocabIndex index_;
  bool lowercase_ = true;
  bool strip_accents_ = true;
  int max_input_chars_per_word_ = 100;
  std::array<std::int32_t, 128> ascii_punct_id_{};  // id of each ASCII punctuation word
};

}  // namespace bertfit
