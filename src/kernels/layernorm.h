// LayerNorm over the last dimension, biased variance, as torch.nn.LayerNorm. A null bias (and
// its null gradient) is LayerNorm(bias=False).
#pragma once

#include <cstdint>

namespace bertfit {

// x, out: (N,C); weight, bias: (C); mean, rstd: (N) saved for backward. out may alias x.
void layernorm_forward(float* out, float* mean, float* rstd, const float* x, const float* weight,
                       const float* bias, std::int64_t N, int C, float eps);

// dx (N,C) = the input's gradient (written, not summed: it is the only term), and dweight,
// dbias (C) += from dout (N,C). Needs the input x (not aliased by out); dx may alias neither x
// nor dout.
void layernorm_backward(float* dx, float* dweight, float* dbias, const float* dout, const float* x,
                        const float* weight, const float* mean, const float* rstd, std::int64_t N,
                        int C);

// The sublayer ending of a BERT layer in one pass over the rows: res = x + Drop(y) (Drop as
// dropout_forward with stream `key`, element (first_row + r)·C + c; p = 0: none), out = LN(res)
// as layernorm_forward. The same bits as dropout_forward, add_forward, layernorm_forward in
// turn. res may alias y; out aliases neither. first_row: the pointers are at row first_row of
// the tensor the dropout stream numbers (a call on part of the rows, as a product's epilogue).
void dropout_add_layernorm_forward(float* out, float* res, float* mean, float* rstd, const float* y,
                                   const float* x, const float* weight, const float* bias,
                                   std::int64_t N, int C, float eps, float p, std::uint64_t key,
                                   std::int64_t first_row = 0);

// Its backward, and the start of the backward of the product y = ·Wᵀ + b before it, in one
// pass: dres (N,C) = LN's input gradient (written; the residual input x's gradient), dweight,
// dbias (C) += LN's parameter gradients, dy = Drop's backward of dres, written in fp32 to dy_f32
// and/or rounded to bf16 into dy_bf16 (each when not null), and ybias (C) += Σ over rows of dy
// (the product's bias gradient). dres, dweight, dbias and dy hold the bits of
// layernorm_backward, dropout_backward and cast_f32_to_bf16 in turn; ybias is a double sum like
// bias_backward's in another order. dy_f32 may alias dres only when p = 0.
void layernorm_dropout_bias_backward(float* dres, float* dweight, float* dbias, float* dy_f32,
                                     std::uint16_t* dy_bf16, float* ybias, const float* dout,
                                     const float* res, const float* weight, const float* mean,
                                     const float* rstd, std::int64_t N, int C, float p,
                                     std::uint64_t key);

}  // namespace bertfit
