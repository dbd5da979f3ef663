// Matrix-product FLOPs of the classifier, for throughput and MFU reports. Counts 2 FLOPs per
// multiply-add of every matrix product (the embedding projection where there is one, q/k/v/o,
// attention scores and mixing, FFN, head; with relative positions (DeBERTa) the c2p and p2c
// products against the rows of the relative embeddings T tokens' distances reach, and the
// projections of the P relative embeddings by each layer's query and key weights);
// elementwise work is not counted (it is a few percent and not what the peak measures).
#pragma once

#include <algorithm>
#include <cstdint>

#include "model/config.h"
#include "model/embeddings.h"
#include "model/relative_positions.h"

namespace bertfit {

// The rows of the relative embeddings that the distances of T tokens reach (c2p's and p2c's
// together): the R of attention_relative.cc's per-head c2p and p2c products.
inline double relative_rows_reached(const ModelConfig& c, std::int64_t T) {
  int r0 = RelativePositions::rows(c), r1 = -1;
  for (bool p2c : {false, true}) {
    if (!(p2c ? c.relative.p2c : c.relative.c2p)) continue;
    for (const std::int32_t row : relative_rows(c, static_cast<int>(T), p2c)) {
      r0 = std::min(r0, row);
      r1 = std::max(r1, row);
    }
  }
  return r1 < r0 ? 0.0 : static_cast<double>(r1 - r0 + 1);
}

// Forward FLOPs for B sequences of T tokens. `first_only_last_layer`: as bertfit executes by
// default (ModelInput::full_last_layer false), the last layer's attention computes one query
// row per sequence and its output projection and FFN run on B rows; false counts every token
// (what a framework computing all hidden states, like the peer, executes).
// `project_relative`: count the relative embeddings' projections (P rows by each layer's query
// and key weights): a training forward and a framework's forward make them every pass; bertfit's
// inference makes them once when preparing the weights (ModelWeights::relative_projection).
inline double forward_flops(const ModelConfig& c, std::int64_t B, std::int64_t T,
                            bool first_only_last_layer = true, bool project_relative = false) {
  const double C = c.hidden, I = c.intermediate;
  const bool rel = RelativePositions::used(c);
  const double R = rel ? relative_rows_reached(c, T) : 0.0;
  auto layer = [&](double rows, double queries) {
    return 2 * (B * T) * C * 3 * C        // fused QKV projection (every token: keys, values)
           + 2 * 2 * B * queries * T * C  // q·kᵀ and p·v over all heads
           + (rel && c.relative.c2p ? 2 * B * queries * R * C : 0.0)  // c2p: q · pkᵀ
           + (rel && c.relative.p2c ? 2.0 * B * T * R * C : 0.0)      // p2c: k · pqᵀ (every key)
           + 2 * rows * C * C                                         // output projection
           + 2 * 2 * rows * C * I;                                    // FFN up and down
  };
  const double full = layer(static_cast<double>(B * T), static_cast<double>(T));
  const double last = first_only_last_layer ? layer(static_cast<double>(B), 1.0) : full;
  const double head = 2.0 * B * C * C + 2.0 * B * C * c.num_labels;
  const double projection = Embeddings::projects(c) ? 2.0 * B * T * c.embedding_dim() * C : 0.0;
  const double relative =
      rel && project_relative ? 2.0 * c.layers * RelativePositions::rows(c) * C * 2 * C : 0.0;
  return projection + relative + (c.layers - 1) * full + last + head;
}

// A training step: forward, then backward's two products (dX and dW) per forward product.
inline double train_step_flops(const ModelConfig& c, std::int64_t B, std::int64_t T,
                               bool first_only_last_layer = true) {
  return 3 * forward_flops(c, B, T, first_only_last_layer, /*project_relative=*/true);
}

}  // namespace bertfit
