// Hugging Face initialisation of a fresh model's flat parameter buffer, deterministic for a
// given seed whatever the number of threads.
#pragma once

#include <cstdint>

#include "model/config.h"
#include "model/param_layout.h"

namespace bertfit {

// Fills every tensor of `layout` as transformers' _init_weights does: ParamInit::kNormal ->
// normal(0, initializer_range), kZero -> 0, kOne -> 1; then zeroes the [PAD] row
// (pad_token_id) of the word embeddings. ModernBERT's scheme (InitScheme::kModernBert) instead
// truncates the normals and scales them by role, and keeps the padding row. Element i of tensor
// t depends only on (seed, t, i).
void init_params(const ParamLayout& layout, const ModelConfig& config, std::uint64_t seed,
                 float* params);

// Initialises one tensor only (the same values init_params gives it); used to create a head
// that a checkpoint lacks. `tensor_index` is the entry's index in layout.entries().
void init_param_tensor(const ParamLayout& layout, const ModelConfig& config,
                       std::size_t tensor_index, std::uint64_t seed, float* params);

}  // namespace bertfit
