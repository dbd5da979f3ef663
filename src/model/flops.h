// Matrix-product FLOPs of the classifier, for throughput and MFU reports. Counts 2 FLOPs per
// multiply-add of every matrix product (projections, attention scores and mixing, FFN, head);
// elementwise work is not counted (it is a few percent and not what the peak measures).
#pragma once

#include <cstdint>

#include "model/config.h"

namespace bertfit {

// Forward FLOPs for B sequences of T tokens.
inline double forward_flops(const ModelConfig& c, std::int64_t B, std::int64_t T) {
  const double N = static_cast<double>(B * T), C = c.hidden, I = c.intermediate;
  const double per_layer = 2 * N * C * 3 * C        // fused QKV projection
                           + 2 * 2 * B * T * T * C  // q·kᵀ and p·v over all heads
                           + 2 * N * C * C          // output projection
                           + 2 * 2 * N * C * I;     // FFN up and down
  const double head = 2.0 * B * C * C + 2.0 * B * C * c.num_labels;
  return c.layers * per_layer + head;
}

// A training step: forward, then backward's two products (dX and dW) per forward product.
inline double train_step_flops(const ModelConfig& c, std::int64_t B, std::int64_t T) {
  return 3 * forward_flops(c, B, T);
}

}  // namespace bertfit
