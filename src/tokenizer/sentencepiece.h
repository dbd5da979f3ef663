// SentencePiece through Debian's libsentencepiece, with the ids of transformers 4.28's
//   XLMRobertaTokenizer (fairseq: <s>=0 <pad>=1 </s>=2 <unk>=3, every spm id + 1, <mask> last),
//   CamembertTokenizer (<s>NOTUSED=0 <pad>=1 </s>NOTUSED=2 <unk>=3, spm ids + 4, <mask> last),
//   DebertaV2Tokenizer (spm.model's own ids: DeBERTa-v3's [PAD]=0 [CLS]=1 [SEP]=2 [UNK]=3 are
//   pieces of the model; [MASK] and added_tokens.json's tokens after the pieces; template
//   [CLS] A [SEP] B [SEP] with token types 0/1; do_lower_case and split_by_punct from
//   tokenizer_config.json; sentencepiece_deberta.cc),
// or a tokenizer.json's (sentencepiece_json.cc). Special tokens written in the text are split off
// as the slow tokenizers do (plain-string specials eat the whitespace on both sides, <mask> only
// on its left); each remaining piece of text goes through the spm model (its own normalizer,
// whitespace handling and dummy prefix).
//
// Offsets: the bytes of the input each piece came from, as libsentencepiece reports them (a
// piece's "\u2581" standing for a space covers that space); with lowercasing, the bytes of the
// original characters the lowercased ones came from.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace bertfit {

// kNone: the ids are the model's own (a model built from tokenizer.json, whose ids are final).
enum class FairseqMapping { kXlmRoberta, kCamembert, kNone };

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // model_path: a SentencePiece model (sentencepiece.bpe.model). config_dir ("" for none) holds
  // the optional tokenizer_config.json, special_tokens_map.json (the special tokens' strings and
  // flags) and added_tokens.json, read as from_pretrained reads them.
  static std::unique_ptr<SentencePieceTokenizer> from_model_file(const std::string& model_path,
                                                                 const std::string& config_dir,
                                                                 FairseqMapping mapping);
  // DeBERTa-v2/v3's spm.model read as DebertaV2Tokenizer.from_pretrained reads it: the model's
  // ids; [CLS]/[SEP]/[PAD]/[UNK]/[MASK] (or config_dir's tokenizer_config.json /
  // special_tokens_map.json strings) resolved through added_tokens.json, then the pieces, then
  // the next free id (sanitize_special_tokens); do_lower_case and split_by_punct from
  // tokenizer_config.json. Kind kDebertaSentencePiece, template kBert.
  static std::unique_ptr<SentencePieceTokenizer> from_deberta_model_file(
      const std::string& model_path, const std::string& config_dir);
  // tokenizer.json with a Unigram or BPE model behind a Metaspace pre-tokenizer and a
  // Precompiled normalizer (what transformers' converters write for SentencePiece models): an
  // spm model is rebuilt from it (sentencepiece_json.cc) and run by the library, with the ids
  // of tokenizer.json; its added_tokens are matched with their own lstrip/rstrip. config_dir's
  // tokenizer_config.json / special_tokens_map.json name the special tokens. A post_processor
  // template with one special token between A and B (DebertaV2Converter's "[CLS] $A [SEP] $B:1
  // [SEP]:1") makes it kDebertaSentencePiece with template kBert (and [CLS]-style defaults for
  // the special tokens' strings), as are DeBERTa's fast tokenizer files; otherwise kSentencePiece
  // with RoBERTa's template. A Lowercase normalizer lowercases as do_lower_case does.
  static std::unique_ptr<SentencePieceTokenizer> from_tokenizer_json(const std::string& path,
                                                                     const std::string& config_dir);
  ~SentencePieceTokenizer() override;

  void tokenize_into(std::string_view text, std::vector<std::int32_t>& ids,
                     std::vector<TokenOffset>* offsets) const override;
  std::string token(std::int32_t id) const override;
  FairseqMapping mapping() const { return mapping_; }

 protected:
  // XLMRobertaTokenizer's: joined, "\u2581" as a space, stripped (CamemBERT's own rule, which
  // decodes the pieces between special tokens with the spm model, is not followed).
  // DebertaV2Tokenizer's (SPMTokenizer.decode): runs of pieces decoded by the spm model, each
  // special token glued after the run before it, a space before a special that follows a run.
  std::string tokens_to_string(const std::vector<std::string>& tokens) const override;
  bool is_added_id(std::int32_t id) const override;

 private:
  SentencePieceTokenizer(TokenizerKind kind, PairTemplate pair_template);
  // Loads a serialized spm ModelProto; source names the file in errors.
  void load_proto(const std::string& bytes, const std::string& source);
  // The id transformers' _convert_token_to_id gives piece.
  std::int32_t token_to_id(const std::string& piece) const;
  // Appends the ids (and offsets, shifted by base) of plain text through the spm model.
  void encode_spm(std::string_view text, std::uint32_t base, std::vector<std::int32_t>& ids,
                  std::vector<TokenOffset>* offsets) const;
  // The same, split first at punctuation with split_by_punct_.
  void encode_text(std::string_view text, std::uint32_t base, std::vector<std::int32_t>& ids,
                   std::vector<TokenOffset>* offsets) const;
  // The transformers 4.28 lowercasing of do_lower_case: every character but those of the
  // no-split tokens (keep_case_, the first in sorted order that starts at a place) lowercased
  // one by one as str.lower() does; origin gets, for each byte of out, the bytes of text it
  // came from.
  void lower_keeping_tokens(std::string_view text, std::string& out,
                            std::vector<TokenOffset>& origin) const;

  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  FairseqMapping mapping_ = FairseqMapping::kXlmRoberta;
  std::vector<std::pair<std::string, std::int32_t>> fairseq_;  // fixed tokens -> ids
  std::int32_t offset_ = 1;                                    // spm id + offset_ = id
  std::vector<std::int32_t> spm_to_id_;                        // spm id -> id
  std::vector<std::string> added_tokens_;  // added_tokens.json's, ids after <mask> (DeBERTa:
                                           // after the pieces, [MASK] first)
  tokenizer_detail::AddedTokenSplitter added_;
  // DeBERTa: ids from first_added_id_ on are added tokens (transformers' added_tokens_encoder).
  std::int32_t first_added_id_ = -1;
  bool lowercase_ = false;              // do_lower_case (tokenizer.json: a Lowercase normalizer)
  bool split_by_punct_ = false;         // split_by_punct: each punctuation character apart
  std::vector<std::string> keep_case_;  // sorted no-split tokens, kept as written
  std::vector<std::string> special_strings_;  // the special tokens' strings (decode)
};

}  // namespace bertfit
