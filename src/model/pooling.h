// Sentence-embedding pooling, as sentence-transformers' Pooling module computes it from the
// last layer's token vectors and the attention mask: the first token (CLS), the mean, the
// per-channel max, the sum over the square root of the length, or the last real token. Several
// modes are concatenated in the order sentence-transformers concatenates them (the order of
// ModelConfig::pooling, which the folder's reader sets).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace bertfit {

enum class Pooling { kCls, kMean, kMax, kMeanSqrtLen, kLastToken };

// The activation of a sentence-transformers Dense module (its config's torch class).
enum class DenseActivation { kTanh, kIdentity, kRelu, kGelu };

// A Dense module after the pooling, as the embedding head runs it: y = activation(W x + b), W
// (out, in), b (out). Its tensors are "<dense_module_path(i)>.linear.weight" / ".linear.bias" in
// the layout (and in `forward --grads`), read from and written to the module's own folder.
struct DenseLayer {
  int in_features = 0;
  int out_features = 0;
  DenseActivation activation = DenseActivation::kTanh;
  bool operator==(const DenseLayer&) const = default;
};

// The most Dense modules a model may have (the layout's roles for them: model/param_layout.h).
inline constexpr int kMaxDenseModules = 4;

// The folder of the i-th Dense module as bertfit names it and writes it: "2_Dense", "3_Dense", ...
// (after the Transformer at 0 and the Pooling at 1, as sentence-transformers' save() numbers them).
inline std::string dense_module_path(std::size_t i) { return std::to_string(i + 2) + "_Dense"; }

// The pooling of a plain encoder as TEI's --pooling names it: cls, mean, max, mean_sqrt_len,
// last_token (also TEI's CLI spelling last-token); nullopt otherwise (model/st_folder.cc).
std::optional<Pooling> parse_pooling(std::string_view name);
// sentence-transformers' Normalize divisor of a vector: max(‖v‖₂, 1e-12) (F.normalize), the sum
// in double; what the pooling head, `embed --normalize` and serve's `normalize` divide by.
float l2_norm(const float* v, std::int64_t n);

// The canonical name of a mode: cls, mean, max, mean_sqrt_len, last_token.
const char* pooling_name(Pooling pooling);

}  // namespace bertfit
