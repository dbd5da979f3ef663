// The tokenizer interface every caller (data, task, serve, the CLI) uses: ids and byte offsets of
// a text, single and pair encoding with the family's template and longest_first truncation, the
// special ids and the largest id, and ids back to text (decode, decode.cc). Implementations:
// WordPiece (wordpiece.h), byte-level BPE (bpe.h) and SentencePiece (sentencepiece.h: XLM-R's,
// CamemBERT's and DeBERTa's); load_tokenizer picks one from a model folder.
//
// Offsets are BYTE offsets [begin, end) into the UTF-8 text the caller passed (Hugging Face's
// fast tokenizers give character offsets; byte_to_char_offsets converts). Special tokens of a
// template get {0, 0}, as in transformers. A tokenizer is called once per text (one virtual
// call); the per-token loops are inside the implementation.
//
// Thread-safe: const methods may be called concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/kind.h"

namespace bertfit {

struct TokenOffset {
  std::uint32_t begin = 0, end = 0;  // bytes [begin, end) of the text the token came from
  bool operator==(const TokenOffset&) const = default;
};

struct Encoding {
  std::vector<std::int32_t> input_ids;
  std::vector<std::int32_t> token_type_ids;
  std::vector<std::int32_t> attention_mask;  // all ones (no padding is added here)
  // With encode(..., with_offsets = true): each token's bytes in its own text (a or b); {0, 0}
  // for the template's special tokens. Empty otherwise.
  std::vector<TokenOffset> offsets;
  std::int64_t truncated_tokens = 0;  // tokens of a and b cut to fit max_len
};

const char* tokenizer_kind_name(TokenizerKind kind);

// How special tokens frame one or two texts.
//   kBert:     [CLS] A [SEP] (B [SEP]); token types 0 for [CLS] A [SEP], 1 for B [SEP].
//   kRoberta:  <s> A </s> (</s> B </s>); token types all 0 (RoBERTa, XLM-R, CamemBERT).
//   kTemplate: a tokenizer.json's TemplateProcessing, as its pieces (post_template()); e.g.
//              ModernBERT's [CLS] A [SEP] (B [SEP]) with token types all 0.
// (DeBERTa uses kBert with its own [CLS]/[SEP] ids.)
enum class PairTemplate { kBert, kRoberta, kTemplate };

// One piece of a TemplateProcessing: special ids, or the text A (sequence 0) or B (1), with the
// token type its tokens get.
struct TemplatePiece {
  int sequence = -1;  // 0: A, 1: B, -1: the special ids below
  std::vector<std::int32_t> ids;
  std::int32_t type_id = 0;
  bool operator==(const TemplatePiece&) const = default;
};
struct PostTemplate {
  std::vector<TemplatePiece> single, pair;
};

// How a pair longer than max_len is cut ("longest_first" in both):
//   kOneByOne: transformers 4.28's slow tokenizers: one token at a time from the longer text,
//              from b on ties (an odd budget leaves a the extra token).
//   kHalves:   the tokenizers library (PreTrainedTokenizerFast): the shorter text keeps what the
//              longer one leaves, unless both exceed half the budget; then the shorter keeps
//              budget / 2 and the longer the rest.
enum class PairTruncation { kOneByOne, kHalves };

struct SpecialIds {
  std::int32_t cls = -1;  // [CLS] or <s> (bos)
  std::int32_t sep = -1;  // [SEP] or </s> (eos)
  std::int32_t pad = -1, unk = -1, mask = -1;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Appends the ids of text (no template specials, no truncation) to ids and, when offsets is
  // not null, one offset per id. Special tokens written literally in the text are matched as
  // the family's slow transformers tokenizer does.
  virtual void tokenize_into(std::string_view text, std::vector<std::int32_t>& ids,
                             std::vector<TokenOffset>* offsets) const = 0;
  // Appends the ids of one word of a pre-split text, as transformers tokenizes each word with
  // is_split_into_words=True (byte-level BPE: with a prefix space). Default: tokenize_into.
  virtual void tokenize_word_into(std::string_view word, std::vector<std::int32_t>& ids) const;
  // The vocabulary's string for id (as convert_ids_to_tokens gives it).
  virtual std::string token(std::int32_t id) const = 0;

  std::vector<std::int32_t> tokenize_ids(std::string_view text) const;

  // The text of ids as the family's slow transformers 4.28.1 tokenizer decodes them
  // (PreTrainedTokenizer._decode): special ids dropped when skip_special_tokens; the other
  // tokens' strings joined by the family's convert_tokens_to_string (WordPiece: spaces, "##"
  // glued, stripped; byte-level BPE: the bytes they stand for, invalid UTF-8 replaced by U+FFFD
  // as Python's errors="replace"; SentencePiece: "▁" as a space, stripped), each added
  // (non-vocabulary) token apart and every part joined by a space; then clean_up_tokenization
  // (" ." -> ".", " n't" -> "n't", ...) when clean_up (default: the folder's
  // clean_up_tokenization_spaces, true unless tokenizer_config.json says false). Throws Error
  // naming an id outside 0..max_id().
  std::string decode(std::span<const std::int32_t> ids, bool skip_special_tokens,
                     std::optional<bool> clean_up = std::nullopt) const;
  // id is one of the tokenizer's special tokens (transformers' all_special_ids).
  bool is_special_id(std::int32_t id) const;
  bool clean_up_tokenization_spaces() const { return clean_up_tokenization_spaces_; }
  // tokenizer_config.json's clean_up_tokenization_spaces (load_tokenizer sets it).
  void set_clean_up_tokenization_spaces(bool on) { clean_up_tokenization_spaces_ = on; }
  // sentence-transformers' Transformer module with do_lower_case: every text is lowercased as
  // Python's str.lower() (python_lower) before it is tokenized (encode, tokenize_ids; callers
  // of tokenize_into pass their text through input_text). Set by the commands for such a folder.
  void set_lowercase_input(bool on) { lowercase_input_ = on; }
  // The text to tokenize: lowercased into `buffer` when lowercase_input, else `text` itself.
  // Offsets of the tokens then refer to the returned text.
  std::string_view input_text(std::string_view text, std::string& buffer) const;

  // The template around a (and b) truncated to max_len total tokens with HF's longest_first
  // strategy (one token at a time from the longer sequence, from b on ties). Throws Error if
  // max_len cannot hold the template's special tokens. A single text is truncated down to
  // nothing if need be, where HF would log an error and return it untruncated.
  Encoding encode(std::string_view a, std::optional<std::string_view> b, int max_len,
                  bool with_offsets = false) const;
  // The same from already tokenized ids (a, b without special tokens). With a_offsets (and
  // b_offsets for a pair), one per id, the encoding's offsets are filled as encode's.
  Encoding encode_ids(std::vector<std::int32_t> a, std::optional<std::vector<std::int32_t>> b,
                      int max_len, std::vector<TokenOffset>* a_offsets = nullptr,
                      std::vector<TokenOffset>* b_offsets = nullptr) const;
  // The tokens a text of la (and a second of lb) tokens keep under a budget for both (max_len
  // less the special tokens), by pair_truncation()'s rule; a single text keeps the budget.
  std::pair<std::size_t, std::size_t> kept_lengths(std::size_t la, std::size_t lb, bool pair,
                                                   std::size_t budget) const;
  // Number of special tokens the template adds: 2 for a single text; 3 (BERT) or 4 (RoBERTa)
  // for a pair; kTemplate: the ids of its special pieces.
  int num_special_tokens(bool pair) const;

  TokenizerKind kind() const { return kind_; }
  PairTemplate pair_template() const { return template_; }
  // The pieces of a kTemplate tokenizer (empty otherwise).
  const PostTemplate& post_template() const { return post_template_; }
  PairTruncation pair_truncation() const { return truncation_; }
  const SpecialIds& special_ids() const { return special_; }
  std::int32_t cls_id() const { return special_.cls; }
  std::int32_t sep_id() const { return special_.sep; }
  std::int32_t pad_id() const { return special_.pad; }
  std::int32_t unk_id() const { return special_.unk; }
  std::int32_t mask_id() const { return special_.mask; }
  // The largest id the tokenizer can produce; a model needs vocab_size > max_id().
  std::int32_t max_id() const { return max_id_; }
  // Number of ids (max_id() + 1): what a model's vocab_size must at least be.
  int vocab_size() const { return max_id_ + 1; }
  // The files the tokenizer was read from (a saved model copies them unchanged).
  const std::vector<std::string>& source_files() const { return source_files_; }

 protected:
  Tokenizer(TokenizerKind kind, PairTemplate pair_template)
      : kind_(kind), template_(pair_template) {}
  Tokenizer(const Tokenizer&) = default;
  Tokenizer(Tokenizer&&) = default;
  Tokenizer& operator=(const Tokenizer&) = default;
  Tokenizer& operator=(Tokenizer&&) = default;

  // transformers' convert_tokens_to_string of the family, for tokens that are not added ones.
  virtual std::string tokens_to_string(const std::vector<std::string>& tokens) const = 0;
  // id is an added token (added_tokens_encoder: not in the model's own vocabulary), which
  // decode keeps apart from its neighbours.
  virtual bool is_added_id(std::int32_t /*id*/) const { return false; }

  TokenizerKind kind_;
  PairTemplate template_;
  PostTemplate post_template_;  // kTemplate's pieces
  PairTruncation truncation_ = PairTruncation::kOneByOne;
  SpecialIds special_;
  // Special ids beyond special_ (bos, eos, additional special tokens) that decode skips.
  std::vector<std::int32_t> extra_special_ids_;
  bool clean_up_tokenization_spaces_ = true;
  bool lowercase_input_ = false;
  std::int32_t max_id_ = -1;
  std::vector<std::string> source_files_;

 private:
  Encoding assemble(std::vector<std::int32_t> a, std::vector<TokenOffset>* a_offsets,
                    std::optional<std::vector<std::int32_t>> b, std::vector<TokenOffset>* b_offsets,
                    int max_len) const;
};

// Loads the tokenizer of a model folder, chosen by the files present and tokenizer_config.json
// (tokenizer_class) or config.json (model_type):
//   vocab.txt -> WordPiece; vocab.json + merges.txt -> byte-level BPE;
//   sentencepiece.bpe.model -> SentencePiece (XLM-R's ids, or CamemBERT's for CamembertTokenizer
//   / model_type camembert); spm.model -> DeBERTa's SentencePiece (DebertaV2Tokenizer /
//   model_type deberta-v2, which also take tokenizer.json when there is no spm.model); else
//   tokenizer.json by model.type (WordPiece; BPE with ByteLevel; Unigram or BPE with Metaspace
//   and Precompiled -> SentencePiece with tokenizer.json's ids, DeBERTa's with its template).
//   A folder whose tokenizer_class is PreTrainedTokenizerFast or whose model_type is modernbert
//   takes its tokenizer.json first; a byte-level BPE one is kFastByteLevelBpe (the tokenizers
//   library's semantics: its post-processor, added tokens and pre-tokenizer settings) for
//   modernbert or a TemplateProcessing/BertProcessing post-processor, else (RoBERTa's
//   RobertaProcessing) kByteLevelBpe.
// Throws Error naming the folder and the files it looked for, or the file and key at fault.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& model_dir);
// A single tokenizer file: vocab.txt (WordPiece, lowercased), tokenizer.json (a byte-level BPE
// one with a TemplateProcessing or BertProcessing post-processor as kFastByteLevelBpe), spm.model
// (DeBERTa's ids and template, no folder settings) or another sentencepiece .model (XLM-R ids).
std::unique_ptr<Tokenizer> load_tokenizer_file(const std::string& path);

// The tokenizer files of model_dir that a saved model carries so that transformers'
// AutoTokenizer loads it: every one of vocab.txt, vocab.json, merges.txt, tokenizer.json,
// sentencepiece.bpe.model, spm.model, tokenizer_config.json, special_tokens_map.json,
// added_tokens.json present. copy_tokenizer_files copies them unchanged into dest_dir (created if
// missing) and returns the names copied; throws Error naming the file on failure.
std::vector<std::string> tokenizer_file_names(const std::string& model_dir);
std::vector<std::string> copy_tokenizer_files(const std::string& model_dir,
                                              const std::string& dest_dir);

// Byte offsets into text -> offsets in Unicode code points (what HF's fast tokenizers report);
// an invalid UTF-8 byte counts as one code point.
std::vector<TokenOffset> byte_to_char_offsets(std::string_view text,
                                              const std::vector<TokenOffset>& offsets);

}  // namespace bertfit
