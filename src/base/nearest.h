// "Did you mean ...?": the candidate nearest to a mistyped word by edit distance, when it is
// close. Unknown commands and flags (apps/bertfit/app.cc) and unknown keys and knobs of
// tuned.json (tune/tuned_file.cc) name it.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace bertfit {

// Levenshtein distance (insertions, deletions and substitutions of bytes).
std::size_t edit_distance(const std::string& a, const std::string& b);

// The candidate nearest to `word`, when it is close: at most a third of its letters differ
// (a transposition counts 2: "trian" -> "train"); "" when none is.
std::string nearest(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace bertfit
