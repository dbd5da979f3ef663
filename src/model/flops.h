// Matrix-product FLOPs of the classifier, for throughput and MFU reports. Counts 2 FLOPs per
// multiply-add of every matrix product (the embedding projection where there is one, q/k/v/o,
// attention scores and mixing, FFN, head);
// elementwise work is not counted (it is a few percent and not what the peak measures).
#pragma once

#include <cstdint>

#include "model/config.h"
#include "model/embeddings.h"

namespace bertfit {

// Forward FLOPs for B sequences of T tokens. `first_only_last_layer`: as bertfit executes by
// default (ModelInput::full_last_layer false), the last layer's attention computes one query
// row per sequence and its output projection and FFN run on B rows; false counts every token
// (what a framework computing all hidden states, like the peer, executes).
inline double forward_flops(const ModelConfig& c, std::int64_t B, std::int64_t T,
                            bool first_only_last_layer = true) {
  const double C = c.hidden, I = c.intermediate;
  auto layer = [&](double rows, double queries) {
    return 2 * (B * T) * C * 3 * C        // fused QKV projection (every token: keys, values)
           + 2 * 2 * B * queries * T * C  // q·kᵀ and p·v over all heads
           + 2 * rows * C * C             // output projection
           + 2 * 2 * rows * C * I;        // FFN up and down
  };
  const double full = layer(static_cast<double>(B * T), static_cast<double>(T));
  const double last = first_only_last_layer ? layer(static_cast<double>(B), 1.0) : full;
  const double head = 2.0 * B * C * C + 2.0 * B * C * c.num_labels;
  const double projection = Embeddings::projects(c) ? 2.0 * B * T * c.embedding_dim() * C : 0.0;
  return projection + (c.layers - 1) * full + last + head;
}

// A training step: forward, then backward's two products (dX and dW) per forward product.
inline double train_step_flops(const ModelConfig& c, std::int64_t B, std::int64_t T,
                               bool first_only_last_layer = true) {
  return 3 * forward_flops(c, B, T, first_only_last_layer);
}

}  // namespace bertfit
