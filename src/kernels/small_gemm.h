// Internal to kernels/: a register-blocked fp32 matrix product for the small per-head products
// of attention (a few hundred rows and columns at most, one call per (sequence, head) from
// inside a parallel loop, so single-threaded and without setup). Matrix products of the model's
// linear layers go through gemm/ (oneDNN); kernels/ may not use it (docs/DESIGN.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cast.h"

namespace bertfit::detail {

// C = alpha · A · B, or C += alpha · A · B when `accumulate`. A is M×K with element (i, k) at
// a[i·a_row + k·a_col] (so a transposed operand is just other strides); B is K×N row-major with
// leading dimension ldb; C is M×N row-major with leading dimension ldc. Each C element is a
// sum over k in increasing order (with fused multiply-adds), then scaled by alpha.
void small_gemm(int M, int N, int K, float alpha, const float* a, std::ptrdiff_t a_row,
                std::ptrdiff_t a_col, const float* b, std::ptrdiff_t ldb, float* c,
                std::ptrdiff_t ldc, bool accumulate);

// The same product from bf16 operands with fp32 accumulation, as AVX512_BF16's vdpbf16ps
// computes it (two products per lane and instruction; small_gemm_bf16_scalar on CPUs without
// it). Both operands come as pairs of bf16 values adjacent along K, one 32-bit word per pair
// (the even k in the low half): K is counted in pairs (K2 = K/2; an odd K is padded with a
// zero). A's pair (i, kk) is read at a.base + i·a.row + kk·a.step (in bf16 units; a row-major
// bf16 matrix is {base, ld, 2}; pack_pairs' output read as Aᵀ is {base, 2, 2·ld}). B's pair
// (kk, n) is b[kk·ldb + n] (pack_pairs, pack_pairs_within_rows), ldb >= N rounded up to 16
// (columns past N are read but never reach C). C as small_gemm; columns past N untouched.
struct BF16Pairs {
  const void* base;     // bf16 values (read 32 bits at a time through memcpy)
  std::ptrdiff_t row;   // bf16 units from row i to row i+1
  std::ptrdiff_t step;  // bf16 units from pair kk to pair kk+1
  std::uint32_t pair(std::ptrdiff_t i, std::ptrdiff_t kk) const {
    std::uint32_t p;
    std::memcpy(&p, static_cast<const std::uint16_t*>(base) + i * row + kk * step, sizeof p);
    return p;
  }
  BF16Pairs rows_from(std::ptrdiff_t i) const {
    return {static_cast<const std::uint16_t*>(base) + i * row, row, step};
  }
};

void small_gemm_bf16(int M, int N, int K2, float alpha, const BF16Pairs& a, const std::uint32_t* b,
                     std::ptrdiff_t ldb, float* c, std::ptrdiff_t ldc, bool accumulate);

// Whether small_gemm_bf16 runs on vdpbf16ps here (else on small_gemm_bf16_scalar).
bool has_bf16_dot();

// small_gemm_bf16's loop for CPUs without AVX512_BF16 (each pair of products summed in fp32,
// then added), callable on any CPU for tests.
void small_gemm_bf16_scalar(int M, int N, int K2, float alpha, const BF16Pairs& a,
                            const std::uint32_t* b, std::ptrdiff_t ldb, float* c,
                            std::ptrdiff_t ldc, bool accumulate);

// Operand packing from fp32 (rounded to nearest even) or bf16 bits (copied).
inline std::uint32_t to_bf16_bits(float f) { return f32_to_bf16(f); }
inline std::uint32_t to_bf16_bits(std::uint16_t b) { return b; }

// Row-major A (bf16 units, leading dimension ld): dst[r·ld + c] = bf16 of x[r·rs + c] for
// r < rows, c < cols, and a zero at c = cols when cols is odd.
template <class E>
void pack_rows(std::uint16_t* dst, std::ptrdiff_t ld, const E* x, std::ptrdiff_t rs, int rows,
               int cols) {
  for (int r = 0; r < rows; ++r) {
    std::uint16_t* d = dst + r * ld;
    const E* xr = x + r * rs;
    for (int c = 0; c < cols; ++c) d[c] = static_cast<std::uint16_t>(to_bf16_bits(xr[c]));
    if (cols % 2 != 0) d[cols] = 0;
  }
}

// Pairs of consecutive rows of X (K rows of N, row k at x + k·rs) interleaved:
// dst[kk·ld + n] = (x(2kk, n), x(2kk+1, n)), with a zero high half in the last pair when K is
// odd. Read as B it is X; read as A ({dst, 2, 2·ld}) it is Xᵀ.
template <class E>
void pack_pairs(std::uint32_t* dst, std::ptrdiff_t ld, const E* x, std::ptrdiff_t rs, int K,
                int N) {
  for (int kk = 0; kk < K / 2; ++kk) {
    const E* r0 = x + 2 * kk * rs;
    const E* r1 = r0 + rs;
    std::uint32_t* d = dst + kk * ld;
    for (int n = 0; n < N; ++n) d[n] = to_bf16_bits(r0[n]) | to_bf16_bits(r1[n]) << 16;
  }
  if (K % 2 != 0) {
    const E* r0 = x + (K - 1) * rs;
    std::uint32_t* d = dst + (K / 2) * ld;
    for (int n = 0; n < N; ++n) d[n] = to_bf16_bits(r0[n]);
  }
}

// B = Xᵀ from the rows of X (N rows of K bf16 values, row n at x + n·rs): pairs adjacent within
// X's rows, dst[kk·ld + n] = (x(n, 2kk), x(n, 2kk+1)); a zero high half when K is odd.
inline void pack_pairs_within_rows(std::uint32_t* dst, std::ptrdiff_t ld, const std::uint16_t* x,
                                   std::ptrdiff_t rs, int K, int N) {
  for (int n = 0; n < N; ++n) {
    const std::uint16_t* xn = x + n * rs;
    for (int kk = 0; kk < K / 2; ++kk) {
      std::uint32_t p;
      std::memcpy(&p, xn + 2 * kk, sizeof p);
      dst[kk * ld + n] = p;
    }
    if (K % 2 != 0) dst[(K / 2) * ld + n] = xn[K - 1];
  }
}

}  // namespace bertfit::detail
