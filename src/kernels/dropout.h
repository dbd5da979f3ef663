// Dropout from a counter-based generator: whether element i is kept depends only on
// (key, i), never on thread count or call order, so the backward regenerates the same mask
// and a resumed run reproduces it. Kept elements are scaled by 1/(1-p).
#pragma once

#include <cstdint>

namespace bertfit {

// A 64-bit stream key for one dropout site: mixes the run seed, the optimizer step, the
// micro-batch, the layer and the site within the layer.
std::uint64_t dropout_key(std::uint64_t seed, std::uint64_t step, std::uint64_t micro,
                          std::uint32_t layer, std::uint32_t site);

// 32 uniform random bits for element i of stream `key` (a strong integer hash of both).
std::uint32_t dropout_bits(std::uint64_t key, std::uint64_t i);

// True if element i is kept: dropout_bits(key, i) >= p · 2^32.
bool dropout_keep(std::uint64_t key, std::uint64_t i, float p);

// out = keep ? x / (1-p) : 0 over n elements; out may alias x. p == 0 copies (or no-op).
void dropout_forward(float* out, const float* x, std::int64_t n, float p, std::uint64_t key);

// dx = keep ? dout / (1-p) : 0 (written, not summed): the same mask as the forward with the
// same key, so this is dropout_forward on dout. dx may alias dout.
void dropout_backward(float* dx, const float* dout, std::int64_t n, float p, std::uint64_t key);

}  // namespace bertfit
