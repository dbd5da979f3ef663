// Packing encoded examples into padded (B,T) batches (see batch.h).
#include "data/batch.h"

#include <algorithm>

#include "base/check.h"

namespace bertfit {

Batch make_batch(const std::vector<EncodedExample>& encoded, std::span<const std::int64_t> indices,
                 const BatchOptions& options) {
  CHECK(!indices.empty(), "empty batch");
  CHECK(options.pad_to_multiple_of >= 1, "pad_to_multiple_of must be positive");
  CHECK(!options.token_labels || options.multi_label_classes == 0,
        "token labels and multi-label rows exclude each other");
  std::size_t longest = 0;
  for (std::int64_t i : indices) {
    CHECK(i >= 0 && i < static_cast<std::int64_t>(encoded.size()), "index ", i, " out of range ",
          encoded.size());
    longest = std::max(longest, encoded[i].ids.size());
  }
  int T;
  if (options.fixed_len > 0) {
    CHECK(longest <= static_cast<std::size_t>(options.fixed_len), "row of ", longest,
          " tokens exceeds fixed length ", options.fixed_len);
    T = options.fixed_len;
  } else {
    const auto m = static_cast<std::size_t>(options.pad_to_multiple_of);
    T = static_cast<int>((longest + m - 1) / m * m);
    // Rounding never goes past the model's position table (but never below the longest row).
    if (options.max_len > 0) T = std::max(static_cast<int>(longest), std::min(T, options.max_len));
  }
  Batch batch;
  batch.B = static_cast<int>(indices.size());
  batch.T = T;
  const std::size_t cells = static_cast<std::size_t>(batch.B) * T;
  batch.input_ids.assign(cells, options.pad_id);
  batch.token_type_ids.assign(cells, 0);
  batch.attention_mask.assign(cells, 0);
  batch.labels.reserve(indices.size());
  batch.example_index.assign(indices.begin(), indices.end());
  for (int b = 0; b < batch.B; ++b) {
    const EncodedExample& ex = encoded[indices[b]];
    CHECK(ex.type_ids.size() == ex.ids.size(), "ids and type ids differ in length");
    const std::size_t row = static_cast<std::size_t>(b) * T;
    std::copy(ex.ids.begin(), ex.ids.end(), batch.input_ids.begin() + row);
    std::copy(ex.type_ids.begin(), ex.type_ids.end(), batch.token_type_ids.begin() + row);
    std::fill_n(batch.attention_mask.begin() + row, ex.ids.size(), 1);
    if (options.token_labels) {
      CHECK(ex.token_labels.size() == ex.ids.size(), "token labels and ids differ in length");
      batch.labels.resize(static_cast<std::size_t>(b + 1) * T, -100.0f);
      std::copy(ex.token_labels.begin(), ex.token_labels.end(), batch.labels.begin() + row);
    } else if (options.multi_label_classes > 0) {
      const int K = options.multi_label_classes;
      batch.labels.resize(static_cast<std::size_t>(b + 1) * K, 0.0f);
      for (std::int32_t id : ex.label_ids) {
        CHECK(id >= 0 && id < K, "label id ", id, " outside [0, ", K, ")");
        batch.labels[static_cast<std::size_t>(b) * K + id] = 1.0f;
      }
    } else {
      batch.labels.push_back(ex.label);
    }
  }
  return batch;
}

}  // namespace bertfit
