// The kinds of tokenizer bertfit reads, by the files a model ships: WordPiece (vocab.txt or a
// WordPiece tokenizer.json), byte-level BPE (vocab.json + merges.txt, or tokenizer.json),
// SentencePiece with fairseq's ids and <s> A </s></s> B </s> (XLM-R, CamemBERT:
// sentencepiece.bpe.model, or a Unigram/BPE tokenizer.json) and DeBERTa-v2/v3's SentencePiece
// with the model's own ids and [CLS] A [SEP] B [SEP] (spm.model, or a Unigram tokenizer.json
// with that template). Its own header so that model families (model/family.h), model folders
// and the Hub can name them without the tokenizers themselves.
#pragma once

#include <array>

namespace bertfit {

enum class TokenizerKind { kWordPiece, kByteLevelBpe, kSentencePiece, kDebertaSentencePiece };

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

}  // namespace bertfit
