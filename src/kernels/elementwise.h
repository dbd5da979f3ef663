// Small elementwise and reduction helpers: residual add, bias gradient, row gather/scatter.
#pragma once

#include <cstdint>

namespace bertfit {

// out = a + b over n elements (out may alias a or b).
void add_forward(float* out, const float* a, const float* b, std::int64_t n);

// dbias (M) += column sums of dout (N,M): the gradient of a broadcast bias add.
void bias_backward(float* dbias, const float* dout, std::int64_t N, int M);
// The same from bf16 rows (the sums in double).
void bias_backward_bf16(float* dbias, const std::uint16_t* dout, std::int64_t N, int M);
// The same, and dout_bf16 (N,M) = bf16(dout) in the same pass over dout (for the bf16 products
// of a linear layer's backward).
void bias_backward_cast(float* dbias, std::uint16_t* dout_bf16, const float* dout, std::int64_t N,
                        int M);

// out (R,C) = rows of x (N,C) at row_index (R): e.g. the [CLS] row of each sequence.
void gather_rows(float* out, const float* x, const std::int64_t* row_index, std::int64_t R, int C);
// dx rows at row_index += dout (R,C).
void scatter_add_rows(float* dx, const float* dout, const std::int64_t* row_index, std::int64_t R,
                      int C);

// Unpadded execution, in place. rows (R, strictly increasing): the padded row of each real
// token of a batch of N padded rows. pack_rows moves row rows[r] of x (N,C) to row r, so the
// real tokens end up contiguous in (R,C); unpack_rows is its inverse and zeroes the N - R
// padding rows. Memory-bound copies: a few per layer, against products that shrink by N/R.
void pack_rows(float* x, const std::int64_t* rows, std::int64_t R, int C);
void unpack_rows(float* x, const std::int64_t* rows, std::int64_t R, std::int64_t N, int C);
// The same for bf16 rows (a bf16 product's output).
void pack_rows(std::uint16_t* x, const std::int64_t* rows, std::int64_t R, int C);
void unpack_rows(std::uint16_t* x, const std::int64_t* rows, std::int64_t R, std::int64_t N, int C);

}  // namespace bertfit
