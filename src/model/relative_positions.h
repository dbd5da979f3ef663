// Relative positions (DeBERTa-v2/v3, transformers' DebertaV2Encoder with relative_attention):
// one table of 2·span relative-position embeddings shared by every layer, normalized once per
// pass (norm_rel_ebd "layer_norm"):
//   rel = LN(rel_embeddings)                                               (P,C), P = 2·span
// and, in each layer l, projected by that layer's own query and key products (share_att_key):
//   [pq | pk] = Drop(rel)·[Wq; Wk]ᵀ + [bq; bk]                              (P,2C)
// which its attention reads as the c2p / p2c scores (kernels/attention_relative.h), the row for
// the distance d = i - j being clamp(bucket(d) + span, 0, P-1) (c2p) and clamp(-bucket(-d) + span,
// 0, P-1) (p2c), bucket = transformers' make_log_bucket_position when position_buckets > 0.
// The component declares the table and its LayerNorm (one gradient group, after the
// embeddings'), sizes its buffers, and runs the per-pass and per-layer steps; its backward
// (after layer 0's) takes the sum of the layers' gradients w.r.t. rel through the LayerNorm.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/attention_relative.h"
#include "model/activations.h"
#include "model/config.h"
#include "model/param_layout.h"
#include "model/pass.h"
#include "model/weights.h"

namespace bertfit {

// transformers' make_log_bucket_position for one distance (float32 arithmetic as torch's, so
// that every bucket boundary falls where it does there).
int log_bucket_position(int distance, int bucket_size, int max_position);
// The row of the relative embeddings for each distance d in [-(T-1), T-1], at [d + T - 1]:
// c2p's (p2c false) or p2c's.
std::vector<std::int32_t> relative_rows(const ModelConfig& c, int T, bool p2c);

class RelativePositions {
 public:
  static bool used(const ModelConfig& c) { return c.relative.enabled; }
  static int rows(const ModelConfig& c) { return 2 * c.relative.span(c.max_positions); }
  // rel_embeddings (P,C) and, with layer_norm, its LayerNorm; one gradient group.
  static void declare(const ModelConfig& c, LayoutBuilder& b);
  // Sizes a.rel* for the config (never shrinks): a projection per layer when training.
  static void resize(const ModelConfig& c, Activations& a, bool training);

  explicit RelativePositions(const ModelWeights& weights) : w_(weights) {}

  // a.rel = LN(rel_embeddings); the row tables for a.T.
  void forward(Activations& a) const;
  // Layer l's [pq | pk] into a.rel_pos_of(l), and the scores its attention adds. Without
  // dropout, when the weights hold the projections (ModelWeights::relative_projection, prepared
  // for inference), those are read instead: the same values, computed once per prepare().
  RelativeScores project(const LayerRun& run, int l, Activations& a) const;
  // Every layer's [pq | pk] of the normalized table without dropout, layer after layer (L, P,
  // 2C), into out (resized): what ModelWeights::prepare keeps for inference.
  void project_all(AlignedBuffer<float>& out) const;
  // The scores layer l's attention adds, from what project() left (forward and backward).
  RelativeScores scores(int l, Activations& a) const;
  // From a.d_rel_pos (layer l's attention backward wrote it): the q and k products' gradients
  // (+= into grads, their first 2C rows) and a.d_rel += the projection's input gradient.
  void project_backward(const LayerRun& run, int l, float* grads, Activations& a) const;
  // From a.d_rel (every layer's) to the table's and LayerNorm's gradients. One group done.
  void backward(float* grads, Activations& a, GradsReady& ready) const;

 private:
  RelativeScores scores_at(const float* pos, Activations& a) const;

  const ModelWeights& w_;
};

}  // namespace bertfit
