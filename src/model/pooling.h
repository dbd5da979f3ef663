// Sentence-embedding pooling, as sentence-transformers' Pooling module computes it from the
// last layer's token vectors and the attention mask: the first token (CLS), the mean, the
// per-channel max, the sum over the square root of the length, or the last real token. Several
// modes are concatenated in the order sentence-transformers concatenates them (the order of
// ModelConfig::pooling, which the folder's reader sets).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace bertfit {

enum class Pooling { kCls, kMean, kMax, kMeanSqrtLen, kLastToken };

// The pooling of a plain encoder as TEI's --pooling names it: cls, mean, max, mean_sqrt_len,
// last_token (also TEI's CLI spelling last-token); nullopt otherwise (model/st_folder.cc).
std::optional<Pooling> parse_pooling(std::string_view name);
// sentence-transformers' Normalize divisor of a vector: max(‖v‖₂, 1e-12) (F.normalize), the sum
// in double; what the pooling head, `embed --normalize` and serve's `normalize` divide by.
float l2_norm(const float* v, std::int64_t n);

// The canonical name of a mode: cls, mean, max, mean_sqrt_len, last_token.
const char* pooling_name(Pooling pooling);

}  // namespace bertfit
