// Tagged data for token classification (NER, POS): sentences of words with one tag per word,
// read from CoNLL files or JSONL, as Hugging Face's run_ner.py reads them. The alignment of tags
// with sub-tokens is encode_tagged in data/batch.h.
//
// CoNLL: one word per line, columns separated by spaces or TABs, the word in the first column
// and its tag in the LAST one (CoNLL-2003's "EU NNP B-NP B-ORG" has tag B-ORG); a blank line
// (or one of spaces only) ends a sentence; a line starting with -DOCSTART- is skipped and ends
// the sentence before it, as the Hub's conll2003 loader does. .conll files are recognized by
// name; anything else (CoNLL-2003's own .txt files) needs the format said (--format conll).
//
// JSONL: one JSON object per line with a list of words (strings) and a list of tags of the same
// length: strings, or integers naming id2label[i] (the Hub's datasets store ClassLabel ids).
// An empty word list is a sentence of no words (kept, so that rows and input lines
// correspond).
//
// Both: a UTF-8 BOM is stripped, CRLF line ends are accepted, the path "-" is standard input
// (named <stdin>). Errors a user can cause are one line naming FILE:LINE (a word line without a
// tag, invalid UTF-8, invalid JSON, a missing key, word and tag counts that differ, an integer
// tag without id2label or out of its range) or the file (no sentence at all). With
// skip_malformed, a sentence holding such an error is left out (CoNLL: the whole sentence, up to
// its blank line; JSONL: its line) and recorded in LoadedTagged::skipped instead; a file of no
// good sentence is still an error.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/table.h"

namespace bertfit {

struct TaggedSentence {
  std::vector<std::string> words;
  std::vector<std::string> tags;  // one per word; empty for unlabeled data (prediction)
  std::int64_t line = 0;          // 1-based line of its first word (JSONL: of its object)
  std::int64_t row = 0;           // 0-based among the file's sentences, skipped ones included
};

struct LoadedTagged {
  std::string path;  // as messages name it
  std::vector<TaggedSentence> sentences;
  // The distinct tags of the data sorted bytewise (Python's sort of str, as run_ner's
  // get_label_list); integer JSONL tags are already their id2label names. Empty when unlabeled.
  std::vector<std::string> tag_names;
  // CoNLL: word k of a sentence is on line `line + k` (messages name the word's own line).
  bool one_word_per_line = false;
  std::vector<SkippedRow> skipped;  // sentences left out (skip_malformed), in file order
};

// True for names ending in .conll (CoNLL-2003's .txt files need the format said).
bool is_conll_path(const std::string& path);

// Reads a CoNLL file (path "-": standard input). with_tags = false reads unlabeled data: the
// first column is the word, other columns are ignored and no line needs a tag.
LoadedTagged read_conll(const std::string& path, bool with_tags = true,
                        bool skip_malformed = false);
// The same on in-memory content; path names it in messages.
LoadedTagged parse_conll(std::string_view content, const std::string& path, bool with_tags = true,
                         bool skip_malformed = false);

// Reads JSONL sentences: tokens_column names the words' key, tags_column the tags' key (""
// reads unlabeled data). Integer tags name id2label[i]; an error when id2label is empty or i is
// outside it.
LoadedTagged read_tagged_jsonl(const std::string& path, const std::string& tokens_column,
                               const std::string& tags_column,
                               const std::vector<std::string>& id2label,
                               bool skip_malformed = false);
LoadedTagged parse_tagged_jsonl(std::string_view content, const std::string& path,
                                const std::string& tokens_column, const std::string& tags_column,
                                const std::vector<std::string>& id2label,
                                bool skip_malformed = false);

// The number of words of all sentences.
std::int64_t count_words(const LoadedTagged& data);

}  // namespace bertfit
