// What the fuzz targets that tokenize share: the bert-base-uncased WordPiece tokenizer, its
// vocabulary from $BERTFIT_FUZZ_VOCAB, else BERTFIT_SHARED_DIR/data/vocab/bert-base-uncased.txt
// (set by fuzz/CMakeLists.txt), else ../shared/... relative to the working directory.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/file.h"
#include "tokenizer/wordpiece.h"

namespace bertfit::fuzz {

inline std::string vocab_path() {
  if (const char* env = std::getenv("BERTFIT_FUZZ_VOCAB"); env != nullptr && *env != '\0') {
    return env;
  }
#ifdef BERTFIT_SHARED_DIR
  const std::string built_in =
      std::string(BERTFIT_SHARED_DIR) + "/data/vocab/bert-base-uncased.txt";
  if (path_exists(built_in)) return built_in;
#endif
  for (const char* rel : {"../shared/data/vocab/bert-base-uncased.txt",
                          "../../shared/data/vocab/bert-base-uncased.txt",
                          "../../../shared/data/vocab/bert-base-uncased.txt"}) {
    if (path_exists(rel)) return rel;
  }
  std::fprintf(stderr, "set BERTFIT_FUZZ_VOCAB to bert-base-uncased.txt\n");
  std::abort();
}

// Loaded once per process.
inline const WordPieceTokenizer& tokenizer() {
  static const WordPieceTokenizer tok = WordPieceTokenizer::from_vocab_file(vocab_path());
  return tok;
}

}  // namespace bertfit::fuzz
