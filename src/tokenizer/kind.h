// The kinds of tokenizer bertfit reads, by the files a model ships: WordPiece (vocab.txt or a
// WordPiece tokenizer.json), byte-level BPE (vocab.json + merges.txt, or tokenizer.json),
// SentencePiece with fairseq's ids and <s> A </s></s> B </s> (XLM-R, CamemBERT:
// sentencepiece.bpe.model, or a Unigram/BPE tokenizer.json), DeBERTa-v2/v3's SentencePiece
// with the model's own ids and [CLS] A [SEP] B [SEP] (spm.model, or a Unigram tokenizer.json
// with that template), and a tokenizer.json byte-level BPE run as the Hugging Face tokenizers
// library runs it (PreTrainedTokenizerFast; ModernBERT): the template of its post-processor,
// its added tokens as they are, its pre-tokenizer's add_prefix_space, offsets untrimmed unless
// the post-processor trims them. Its own header so that model families (model/family.h), model
// folders and the Hub can name them without the tokenizers themselves.
#pragma once

#include <array>
#include <span>

namespace bertfit {

enum class TokenizerKind {
  kWordPiece,
  kByteLevelBpe,
  kSentencePiece,
  kDebertaSentencePiece,
  kFastByteLevelBpe,
};

// Every file a tokenizer of these kinds may consist of: what a saved model carries unchanged
// and a Hub download fetches (those a folder lacks are skipped).
inline constexpr std::array<const char*, 9> kTokenizerFileNames = {"vocab.txt",
                                                                   "vocab.json",
                                                                   "merges.txt",
                                                                   "tokenizer.json",
                                                                   "sentencepiece.bpe.model",
                                                                   "spm.model",
                                                                   "tokenizer_config.json",
                                                                   "special_tokens_map.json",
                                                                   "added_tokens.json"};

// The files that hold a tokenizer of a kind (beside its settings files): a model folder of
// that kind carries all files of one of the alternatives, the first being the kind's own
// format. Null entries pad an alternative.
using TokenizerFileSet = std::array<const char*, 2>;
inline std::span<const TokenizerFileSet> tokenizer_file_sets(TokenizerKind kind) {
  static constexpr TokenizerFileSet kWordPiece[] = {{"vocab.txt", nullptr},
                                                    {"tokenizer.json", nullptr}};
  static constexpr TokenizerFileSet kBpe[] = {{"vocab.json", "merges.txt"},
                                              {"tokenizer.json", nullptr}};
  static constexpr TokenizerFileSet kSpm[] = {{"sentencepiece.bpe.model", nullptr},
                                              {"tokenizer.json", nullptr}};
  static constexpr TokenizerFileSet kDeberta[] = {{"spm.model", nullptr},
                                                  {"tokenizer.json", nullptr}};
  static constexpr TokenizerFileSet kJson[] = {{"tokenizer.json", nullptr}};
  switch (kind) {
    case TokenizerKind::kWordPiece:
      return kWordPiece;
    case TokenizerKind::kByteLevelBpe:
      return kBpe;
    case TokenizerKind::kSentencePiece:
      return kSpm;
    case TokenizerKind::kDebertaSentencePiece:
      return kDeberta;
    case TokenizerKind::kFastByteLevelBpe:
      return kJson;
  }
  return {};
}

}  // namespace bertfit
