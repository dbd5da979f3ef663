// Small elementwise and reduction helpers: residual add, bias gradient, row gather/scatter.
#pragma once

#include <cstdint>

namespace bertfit {

// out = a + b over n elements (out may alias a or b).
void add_forward(float* out, const float* a, const float* b, std::int64_t n);

// dbias (M) += column sums of dout (N,M): the gradient of a broadcast bias add.
void bias_backward(float* dbias, const float* dout, std::int64_t N, int M);

// out (R,C) = rows of x (N,C) at row_index (R): e.g. the [CLS] row of each sequence.
void gather_rows(float* out, const float* x, const std::int64_t* row_index, std::int64_t R, int C);
// dx rows at row_index += dout (R,C).
void scatter_add_rows(float* dx, const float* dout, const std::int64_t* row_index, std::int64_t R,
                      int C);

}  // namespace bertfit
