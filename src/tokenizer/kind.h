// The kinds of tokenizer bertfit reads, by the files a model ships: WordPiece (vocab.txt or a
// WordPiece tokenizer.json), byte-level BPE (vocab.json + merges.txt, or tokenizer.json) and
// SentencePiece (sentencepiece.bpe.model, or a Unigram/BPE tokenizer.json). Its own header so
// that model families (model/family.h), model folders and the Hub can name them without the
// tokenizers themselves.
#pragma once

#include <array>

namespace bertfit {

enum class TokenizerKind { kWordPiece, kByteLevelBpe, kSentencePiece };

// Every file a tokenizer of these kinds may consist of: what a saved model carries unchanged
// and a Hub download fetches (those a folder lacks are skipped).
inline constexpr std::array<const char*, 8> kTokenizerFileNames = {"vocab.txt",
                                                                   "vocab.json",
                                                                   "merges.txt",
                                                                   "tokenizer.json",
                                                                   "sentencepiece.bpe.model",
                                                                   "tokenizer_config.json",
                                                                   "special_tokens_map.json",
                                                                   "added_tokens.json"};

}  // namespace bertfit
