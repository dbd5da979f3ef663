// The model families of the command matrix (matrix_cli_test.cc), one entry each: the
// architecture `init --arch` takes, its config keys, its token types, and a tokenizer the test
// writes itself (WordPiece, byte-level BPE, SentencePiece) whose ids it controls, so that the
// data rows' texts map to known ids. Adding a family to the matrix is one entry in
// matrix_families() (matrix_families.cc).
#pragma once

#include <string>
#include <vector>

namespace bertfit::testing {

// A tokenizer of the test's own. Every word is one token; a row's text is its words' texts
// concatenated, the leading space dropped ("tok17 tok9", "qz w").
struct MatrixVocabulary {
  int cls = 0, sep = 0, pad = 0;   // [CLS] / <s>, [SEP] / </s>, padding ([PAD] / <pad>)
  int size = 0;                    // the vocab_size init gives: every id, [MASK] / <mask> included
  int first_lo = 0, first_hi = 0;  // the ids a text may start with
  int word_lo = 0, word_hi = 0;    // the ids of the words after the first
  // Pre-split words (token classification), each tokenized alone: the ids a word starts with
  // (byte-level BPE and SentencePiece: with the space the tokenizer puts before it), and those
  // of the sub-tokens that may follow in the same word (piece_lo > piece_hi: none).
  int split_lo = 0, split_hi = 0;
  int piece_lo = 1, piece_hi = 0;
  std::string (*text)(int id);  // a word's text: " tok17", "q", " q"
  // Writes the tokenizer files into the folder dir (created); returns what `init --vocab` takes.
  std::string (*write)(const std::string& dir);
};

// The config keys the matrix sets with `init --set`.
struct MatrixConfigKeys {
  const char *layers, *hidden, *heads, *intermediate, *activation;
  std::vector<const char*> dropouts;  // every dropout probability, all set to 0
};

struct MatrixFamily {
  const char* arch;  // `init --arch`, the config's model_type
  const MatrixConfigKeys& keys;
  const MatrixVocabulary& vocabulary;
  // 0: no token-type embeddings (the batches' type ids are ignored); 1: RoBERTa's checkpoints'
  // single type (type ids all 0); 2: BERT's sentence pairs (the second half of a row is type 1).
  int type_vocab_size;
};

const std::vector<MatrixFamily>& matrix_families();

}  // namespace bertfit::testing
