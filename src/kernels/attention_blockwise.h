// Blockwise ("flash") scaled dot-product attention: the plain kernel's function (attention.h:
// the same AttentionShape, mask, window, skip_padding_queries / max_queries, and dropout mask
// index ((b·H + h)·T + i)·T + j), computed one (query block, key block) tile at a time with an
// online softmax, so that no T × T buffer exists: the forward keeps the per-row log-sum-exp
// of the scores (B,H,T) instead of the probabilities, and the backward recomputes each tile's
// probabilities from q, k and that log-sum-exp. A query block visits only the key blocks its
// rows can reach (their window, the real keys), so a windowed layer costs O(T · window) time
// and O(T) memory. Results equal the plain kernel's to rounding (the sums run in another order).
#pragma once

#include <cstdint>

#include "kernels/attention.h"

namespace bertfit {

// out (B,T,C) as attention_forward's (rows past the computed queries untouched).
// lse (B,H,T): row i's log Σ_j exp(score_ij) over the keys it sees (the backward's input; rows
// past the computed queries untouched); nullptr when no backward follows.
void attention_blockwise_forward(float* out, float* lse, const float* qkv, const std::int32_t* mask,
                                 AttentionShape s, float p, std::uint64_t key);
// bf16 qkv: products on bf16 operands with fp32 accumulation as the plain kernel's bf16 path
// (the dropped, unnormalized probabilities rounded to bf16 for P̃ · v).
void attention_blockwise_forward(float* out, float* lse, const std::uint16_t* qkv,
                                 const std::int32_t* mask, AttentionShape s, float p,
                                 std::uint64_t key);

// dqkv (B,T,3C), every element written, as attention_backward's, from dout (B,T,C) and the
// forward's out and lse: dS = P ⊙ (dP - r), r_i = dO_i · O_i (= Σ_j P_ij dP_ij, with dropout
// too). Same p and key as the forward.
void attention_blockwise_backward(float* dqkv, const float* dout, const float* qkv,
                                  const float* out, const float* lse, const std::int32_t* mask,
                                  AttentionShape s, float p, std::uint64_t key);
void attention_blockwise_backward(float* dqkv, const float* dout, const std::uint16_t* qkv,
                                  const float* out, const float* lse, const std::int32_t* mask,
                                  AttentionShape s, float p, std::uint64_t key);

}  // namespace bertfit
