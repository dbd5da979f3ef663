// DeBERTa's disentangled attention (transformers' DisentangledSelfAttention with relative
// attention): the content scores plus content-to-position (c2p) and position-to-content (p2c)
// scores against projected relative-position embeddings, all scaled by 1/√(D·(1 + number of
// position types)), then the masked softmax, dropout and P·V of kernels/attention.h:
//   S_ij = s · (q_i·k_j + q_i·pk[c(i-j)] + k_j·pq[p(i-j)])
// q, k, v from the fused QKV rows as in attention.h; pk, pq (P,C): the layer's key and query
// projections of the (normalized) relative embeddings, shared by every sequence of the batch
// (heads at channels h·D, as q and k); c(d), p(d): the row of pk / pq for the distance d = i - j,
// clamp(bucket(d) + span, 0, P-1) and clamp(-bucket(-d) + span, 0, P-1) (the caller builds them:
// model/relative_positions.h). The scores are formed per (sequence, head) from products over the
// rows of pk and pq that the sequence's distances reach, never as a (B,H,T,T) bias tensor.
#pragma once

#include <cstdint>

#include "kernels/attention.h"

namespace bertfit {

struct RelativeScores {
  const float* pos_query = nullptr;  // (P, ld) pq, heads at h·D (p2c; may be null without it)
  const float* pos_key = nullptr;    // (P, ld) pk (c2p; may be null without it)
  std::int64_t ld = 0;               // row stride of pos_query and pos_key
  int P = 0;                         // rows of pos_query / pos_key
  // (2T-1) each: the row for distance d = i - j at [d + T - 1] (T: the shape's); null = no c2p
  // (c2p_rows) or no p2c (p2c_rows).
  const std::int32_t* c2p_rows = nullptr;
  const std::int32_t* p2c_rows = nullptr;
  float scale = 1.0f;  // s = 1/√(D·(1 + [c2p] + [p2c]))
};

// As attention_forward (kernels/attention.h), with S as above. qkv fp32 or bf16 (bf16 q, k, v
// are widened to fp32 per head; the products run in fp32).
void attention_forward(float* out, float* probs, const float* qkv, const std::int32_t* mask,
                       AttentionShape s, float p, std::uint64_t key, const RelativeScores& rel);
void attention_forward(float* out, float* probs, const std::uint16_t* qkv, const std::int32_t* mask,
                       AttentionShape s, float p, std::uint64_t key, const RelativeScores& rel);

// As attention_backward: dqkv written (every element), and the relative embeddings' projection
// gradients added: d_pos_query, d_pos_key (P, rel.ld) += (each may be null when its score type
// is off). One task per head (each head owns its channels of d_pos_*), its sequences in turn.
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* probs,
                        const std::int32_t* mask, AttentionShape s, float p, std::uint64_t key,
                        const RelativeScores& rel, float* d_pos_query, float* d_pos_key);
void attention_backward(float* dqkv, const float* dout, const std::uint16_t* qkv,
                        const float* probs, const std::int32_t* mask, AttentionShape s, float p,
                        std::uint64_t key, const RelativeScores& rel, float* d_pos_query,
                        float* d_pos_key);

}  // namespace bertfit
