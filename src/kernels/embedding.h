// Embeddings: out = word[ids] + pos[positions] (+ type[types]) for N token rows.
#pragma once

#include <cstdint>

namespace bertfit {

// out: (N,C); ids, positions: (N); types: (N) or nullptr (DistilBERT: no token-type table).
// word: (V,C), pos: (P,C) or nullptr (no absolute positions: DeBERTa-v3; positions then unread),
// type: (Tv,C) or nullptr.
void embedding_forward(float* out, const std::int32_t* ids, const std::int32_t* positions,
                       const std::int32_t* types, const float* word, const float* pos,
                       const float* type, std::int64_t N, int C);

// dword, dpos, dtype += scatter of dout (N,C). Rows whose id == pad_id add nothing to dword
// (HF's padding_idx), but still add to dpos and dtype. dpos and dtype may be nullptr.
void embedding_backward(float* dword, float* dpos, float* dtype, const float* dout,
                        const std::int32_t* ids, const std::int32_t* positions,
                        const std::int32_t* types, std::int64_t N, int C, int pad_id);

}  // namespace bertfit
