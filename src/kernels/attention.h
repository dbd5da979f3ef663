// Multi-head scaled dot-product attention with a key padding mask and dropout on the
// probabilities, reading a fused QKV projection. HF semantics: scores = (q / sqrt(D)) · kᵀ;
// keys with mask 0 get probability exactly 0 (HF fills with the dtype's lowest value).
#pragma once

#include <cstdint>

namespace bertfit {

struct AttentionShape {
  int B, T, C, H;  // batch, tokens per sequence, channels, heads (D = C / H)
  // Unpadded execution: query rows after a sequence's last real token are not computed (their
  // out rows and probability rows are left untouched, and backward gives them no gradient),
  // because the caller discards them. Keys after the last real token are skipped always:
  // their probability is exactly 0, so skipping them changes nothing.
  bool skip_padding_queries = false;
  // Only query rows [0, max_queries) of each sequence are computed (0: all), as for
  // skip_padding_queries. A classifier reading only the first token ([CLS]) of the last layer
  // needs that layer's attention for query row 0 alone.
  int max_queries = 0;
  // Padding queries (mask 0) attend to nothing: their probability rows are 0, so their output
  // rows are 0 (DeBERTa's XSoftmax masks queries and keys). The disentangled kernel
  // (attention_relative.h) honours it; the plain one requires it false.
  bool query_mask = false;
  // Sliding-window attention (ModernBERT's local layers): query i sees key j only when
  // |i - j| <= window (-1: every key). Keys outside get probability exactly 0; a query with no
  // real key in its window (only past a sequence's end) gets a uniform row over the real keys.
  // The plain kernel honours it; the disentangled one requires -1.
  int window = -1;
};

// qkv: (B,T,3C) rows laid out [q(C) | k(C) | v(C)], head h at channels [h·D, (h+1)·D).
// mask: (B,T) 1 = real token, 0 = padding (keys only are masked, as HF).
// probs: (B,H,T,T) softmax output BEFORE dropout, saved for backward.
// out: (B,T,C) the heads concatenated (head h at channels h·D..).
// Dropout with probability p on the probabilities, mask from dropout_keep(key, index) where
// index = ((b·H + h)·T + i)·T + j; p == 0 disables it.
void attention_forward(float* out, float* probs, const float* qkv, const std::int32_t* mask,
                       AttentionShape s, float p, std::uint64_t key);

// The same from a bf16 qkv (a bf16 product's output), with the products on bf16 operands and
// fp32 accumulation (AVX512_BF16 where the CPU has it): q, k, v as they are, and the dropped
// probabilities (forward), dO and dS (backward) rounded to bf16 for their products, as PyTorch's
// autocast does; softmax, dropout and the saved probabilities stay fp32.
void attention_forward(float* out, float* probs, const std::uint16_t* qkv, const std::int32_t* mask,
                       AttentionShape s, float p, std::uint64_t key);

// dqkv (B,T,3C) = gradient w.r.t. qkv (written, every element: rows past the computed
// queries and the real keys get their zeros), from dout (B,T,C). Same p and key as the forward.
// Uses dS = P ⊙ (dP - rowsum(dP ⊙ P)) on the saved probs, so masked keys (P = 0) get nothing.
// A sequence with no real key has uniform rows (as HF); its rows still pass this gradient to
// q and k, as BERT's additive mask does (DistilBERT's masked_fill would pass none). Such
// sequences do not occur in practice: [CLS] is always a real token.
// mask: the forward's (B,T) mask (it bounds the loops; the gradient itself comes from probs).
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* probs,
                        const std::int32_t* mask, AttentionShape s, float p, std::uint64_t key);

// The same from a bf16 qkv (see the bf16 attention_forward).
void attention_backward(float* dqkv, const float* dout, const std::uint16_t* qkv,
                        const float* probs, const std::int32_t* mask, AttentionShape s, float p,
                        std::uint64_t key);

}  // namespace bertfit
