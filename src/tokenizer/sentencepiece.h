// SentencePiece through Debian's libsentencepiece, with the fairseq id mappings of transformers
// 4.28's XLMRobertaTokenizer (<s>=0 <pad>=1 </s>=2 <unk>=3, every spm id + 1, <mask> last) and
// CamembertTokenizer (<s>NOTUSED=0 <pad>=1 </s>NOTUSED=2 <unk>=3, spm ids + 4, <mask> last).
// Special tokens written in the text are split off as the slow tokenizers do (plain-string
// specials eat the whitespace on both sides, <mask> only on its left); each remaining piece of
// text goes through the spm model (its own normalizer, whitespace handling and dummy prefix).
//
// Offsets: the bytes of the input each piece came from, as libsentencepiece reports them.
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
  // tokenizer.json with a Unigram or BPE model behind a Metaspace pre-tokenizer and a
  // Precompiled normalizer (what transformers' converters write for SentencePiece models): an
  // spm model is rebuilt from it (sentencepiece_json.cc) and run by the library, with the ids
  // of tokenizer.json; its added_tokens are matched with their own lstrip/rstrip. config_dir's
  // tokenizer_config.json / special_tokens_map.json name the special tokens.
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
  std::string tokens_to_string(const std::vector<std::string>& tokens) const override;
  bool is_added_id(std::int32_t id) const override;

 private:
  SentencePieceTokenizer();
  // Loads a serialized spm ModelProto; source names the file in errors.
  void load_proto(const std::string& bytes, const std::string& source);
  // The id transformers' _convert_token_to_id gives piece.
  std::int32_t token_to_id(const std::string& piece) const;

  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  FairseqMapping mapping_ = FairseqMapping::kXlmRoberta;
  std::vector<std::pair<std::string, std::int32_t>> fairseq_;  // fixed tokens -> ids
  std::int32_t offset_ = 1;                                    // spm id + offset_ = id
  std::vector<std::int32_t> spm_to_id_;                        // spm id -> id
  std::vector<std::string> added_tokens_;  // added_tokens.json's, ids after <mask>
  tokenizer_detail::AddedTokenSplitter added_;
};

}  // namespace bertfit
