// The kinds of tokenizer bertfit reads, by the files a model ships: WordPiece (vocab.txt or a
// WordPiece tokenizer.json), byte-level BPE (vocab.json + merges.txt, or tokenizer.json) and
// SentencePiece (sentencepiece.bpe.model, or a Unigram/BPE tokenizer.json). Its own header so
// that model families (model/family.h) can declare theirs without the tokenizers themselves.
#pragma once

namespace bertfit {

enum class TokenizerKind { kWordPiece, kByteLevelBpe, kSentencePiece };

}  // namespace bertfit
