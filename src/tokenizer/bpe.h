// Byte-level BPE (GPT-2 / RoBERTa) with transformers 4.28's slow RobertaTokenizer semantics:
// special and added tokens matched in raw text (added_tokens.h), add_prefix_space, GPT-2's
// split pattern (gpt2_split.h), bytes mapped to printable characters (bytes_to_unicode), BPE
// merges applied lowest rank first, and each resulting token looked up in the vocabulary
// (unknown -> <unk>). Words of up to 64 bytes are cached (word_cache.h).
//
// Offsets: each token covers whole input bytes (a token may end inside a multi-byte character);
// a token's leading space is left out of its offset, as trim_offsets does.
//
// from_fast_tokenizer_json reads a tokenizer.json as the Hugging Face tokenizers library runs it
// instead (TokenizerKind::kFastByteLevelBpe; PreTrainedTokenizerFast, e.g. ModernBERT's): the
// template of its post-processor (TemplateProcessing, RobertaProcessing, BertProcessing), its
// added tokens with their own flags (lstrip/rstrip whitespace belongs to the token's offsets),
// the pre-tokenizer's add_prefix_space for texts and for each word of a pre-split text, offsets
// trimmed only when the post-processor says trim_offsets, the tokenizers library's
// longest_first truncation, and its ByteLevel decoder (added tokens decoded in line, no spaces
// put around them).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/word_cache.h"

namespace bertfit {

class ByteLevelBpeTokenizer final : public Tokenizer {
 public:
  // vocab.json (token -> id) + merges.txt (read as RobertaTokenizer does: the first line is
  // skipped, and so is a last line without a line break). config_dir ("" for none) holds the
  // optional tokenizer_config.json (special tokens, add_prefix_space), special_tokens_map.json
  // and added_tokens.json, read as from_pretrained reads them; RoBERTa's defaults otherwise.
  static std::unique_ptr<ByteLevelBpeTokenizer> from_files(const std::string& vocab_path,
                                                           const std::string& merges_path,
                                                           const std::string& config_dir);
  // tokenizer.json with a BPE model and a ByteLevel pre-tokenizer; its added_tokens are matched
  // with their own lstrip/rstrip; config_dir's tokenizer_config.json and
  // special_tokens_map.json apply as above.
  static std::unique_ptr<ByteLevelBpeTokenizer> from_tokenizer_json(const std::string& path,
                                                                    const std::string& config_dir);
  // tokenizer.json with the tokenizers library's semantics (above). Its special tokens (cls,
  // sep, pad, mask, unk) are config_dir's tokenizer_config.json / special_tokens_map.json
  // *_token names where given, else the template's first and last special token, the model's
  // unk_token, and the added special tokens [UNK]/<unk>, [PAD]/<pad> and [MASK]/<mask>.
  static std::unique_ptr<ByteLevelBpeTokenizer> from_fast_tokenizer_json(
      const std::string& path, const std::string& config_dir);

  void tokenize_into(std::string_view text, std::vector<std::int32_t>& ids,
                     std::vector<TokenOffset>* offsets) const override;
  // RobertaTokenizer with is_split_into_words=True: the word gets a prefix space unless it
  // starts with whitespace (kFastByteLevelBpe: only with the pre-tokenizer's add_prefix_space).
  void tokenize_word_into(std::string_view word, std::vector<std::int32_t>& ids) const override;
  std::string token(std::int32_t id) const override;
  bool add_prefix_space() const { return add_prefix_space_; }

  // The pieces of one pre-tokenized word (raw bytes), through the cache. Exposed for tests and
  // the fuzz target.
  void bpe_word(std::string_view word, std::vector<tokenizer_detail::CachedPiece>& out) const;

  // Model tables built by the readers in bpe_load.cc.
  struct Model {
    std::unordered_map<std::string, std::int32_t> vocab;      // token -> id
    std::vector<std::pair<std::string, std::string>> merges;  // by rank
    std::vector<std::pair<std::int32_t, std::string>> added;  // id, content (vocab additions)
  };

 protected:
  // RobertaTokenizer's: the bytes the tokens' characters stand for, as UTF-8 with invalid
  // sequences replaced (errors="replace").
  std::string tokens_to_string(const std::vector<std::string>& tokens) const override;
  bool is_added_id(std::int32_t id) const override;

 private:
  ByteLevelBpeTokenizer() : Tokenizer(TokenizerKind::kByteLevelBpe, PairTemplate::kRoberta) {}
  bool fast() const { return kind_ == TokenizerKind::kFastByteLevelBpe; }
  // Interns the symbols and merges of model; source names the file in errors.
  void build(Model model, const std::string& source);
  void tokenize_text(std::string_view text, bool prefix_space, std::vector<std::int32_t>& ids,
                     std::vector<TokenOffset>* offsets) const;
  // BPE of one word without the cache.
  void merge_word(std::string_view word, std::vector<tokenizer_detail::CachedPiece>& out) const;

  struct Merge {
    std::uint32_t rank;
    std::int32_t result;  // symbol
  };
  static std::uint64_t pair_key(std::int32_t a, std::int32_t b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) |
           static_cast<std::uint32_t>(b);
  }

  std::int32_t byte_symbol_[256] = {};       // byte -> symbol
  std::vector<std::int32_t> symbol_id_;      // symbol -> vocabulary id (-1: none)
  std::vector<std::uint32_t> symbol_bytes_;  // symbol -> input bytes it stands for
  std::unordered_map<std::uint64_t, Merge> merges_;
  std::vector<std::string> id_token_;    // id -> token
  std::vector<std::int32_t> added_ids_;  // sorted: the ids of tokens outside vocab (model.added)
  tokenizer_detail::AddedTokenSplitter added_;
  bool add_prefix_space_ = false;
  bool trim_offsets_ = true;  // the leading/trailing spaces of a token left out of its offsets
  std::unique_ptr<tokenizer_detail::WordCache> cache_ =
      std::make_unique<tokenizer_detail::WordCache>();

  friend struct BpeLoader;
};

}  // namespace bertfit
