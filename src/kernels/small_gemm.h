// Internal to kernels/: a register-blocked fp32 matrix product for the small per-head products
// of attention (a few hundred rows and columns at most, one call per (sequence, head) from
// inside a parallel loop, so single-threaded and without setup). Matrix products of the model's
// linear layers go through gemm/ (oneDNN); kernels/ may not use it (docs/DESIGN.md).
#pragma once

#include <cstddef>

namespace bertfit::detail {

// C = alpha · A · B, or C += alpha · A · B when `accumulate`. A is M×K with element (i, k) at
// a[i·a_row + k·a_col] (so a transposed operand is just other strides); B is K×N row-major with
// leading dimension ldb; C is M×N row-major with leading dimension ldc. Each C element is a
// sum over k in increasing order (with fused multiply-adds), then scaled by alpha.
void small_gemm(int M, int N, int K, float alpha, const float* a, std::ptrdiff_t a_row,
                std::ptrdiff_t a_col, const float* b, std::ptrdiff_t ldb, float* c,
                std::ptrdiff_t ldc, bool accumulate);

}  // namespace bertfit::detail
