// Register-blocked small matrix product: tiles of up to 8 rows × 32 columns of C held in
// registers (GCC vector types: 16 AVX-512 registers, or pairs of AVX registers elsewhere) while
// the K loop streams one row of B and broadcasts one element of A per tile row.
#include "kernels/small_gemm.h"

#include <immintrin.h>

#include <cstring>
#include <type_traits>

namespace bertfit::detail {
namespace {

constexpr int kLanes = 16;
using Vec = float __attribute__((vector_size(kLanes * sizeof(float))));

inline Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline void store(float* p, Vec v) { std::memcpy(p, &v, sizeof(v)); }

// f(std::integral_constant<int, R>{}) for R = rows in [1, 7], nothing for 0: the last, shorter
// row tile of a column block, its row count a template argument.
template <class F>
void with_tail_rows(int rows, F&& f) {
  switch (rows) {
    case 0:
      break;
    case 1:
      f(std::integral_constant<int, 1>{});
      break;
    case 2:
      f(std::integral_constant<int, 2>{});
      break;
    case 3:
      f(std::integral_constant<int, 3>{});
      break;
    case 4:
      f(std::integral_constant<int, 4>{});
      break;
    case 5:
      f(std::integral_constant<int, 5>{});
      break;
    case 6:
      f(std::integral_constant<int, 6>{});
      break;
    default:
      f(std::integral_constant<int, 7>{});
      break;
  }
}

// One MR × (NV·16) tile of C.
template <int MR, int NV>
void tile(int K, float alpha, const float* a, std::ptrdiff_t a_row, std::ptrdiff_t a_col,
          const float* b, std::ptrdiff_t ldb, float* c, std::ptrdiff_t ldc, bool accumulate) {
  Vec acc[MR][NV] = {};
  for (int k = 0; k < K; ++k) {
    Vec bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = load(b + k * ldb + v * kLanes);
    const float* ak = a + k * a_col;
    for (int r = 0; r < MR; ++r) {
      const float s = ak[r * a_row];
      for (int v = 0; v < NV; ++v) acc[r][v] += s * bv[v];
    }
  }
  for (int r = 0; r < MR; ++r) {
    for (int v = 0; v < NV; ++v) {
      float* cp = c + r * ldc + v * kLanes;
      Vec out = acc[r][v] * alpha;
      if (accumulate) out += load(cp);
      store(cp, out);
    }
  }
}

// Rows [0, M) of the column block [0, NV·16), MR-row tiles then one smaller tile.
template <int NV>
void column_block(int M, int K, float alpha, const float* a, std::ptrdiff_t a_row,
                  std::ptrdiff_t a_col, const float* b, std::ptrdiff_t ldb, float* c,
                  std::ptrdiff_t ldc, bool accumulate) {
  constexpr int kRows = 8;
  int i = 0;
  for (; i + kRows <= M; i += kRows) {
    tile<kRows, NV>(K, alpha, a + i * a_row, a_row, a_col, b, ldb, c + i * ldc, ldc, accumulate);
  }
  with_tail_rows(M - i, [&](auto rows) {
    tile<decltype(rows)::value, NV>(K, alpha, a + i * a_row, a_row, a_col, b, ldb, c + i * ldc, ldc,
                                    accumulate);
  });
}

}  // namespace

void small_gemm(int M, int N, int K, float alpha, const float* a, std::ptrdiff_t a_row,
                std::ptrdiff_t a_col, const float* b, std::ptrdiff_t ldb, float* c,
                std::ptrdiff_t ldc, bool accumulate) {
  int j = 0;
  for (; j + 2 * kLanes <= N; j += 2 * kLanes) {
    column_block<2>(M, K, alpha, a, a_row, a_col, b + j, ldb, c + j, ldc, accumulate);
  }
  if (j + kLanes <= N) {
    column_block<1>(M, K, alpha, a, a_row, a_col, b + j, ldb, c + j, ldc, accumulate);
    j += kLanes;
  }
  for (; j < N; ++j) {  // fewer than 16 columns left: one at a time
    for (int i = 0; i < M; ++i) {
      float s = 0.0f;
      for (int k = 0; k < K; ++k) s += a[i * a_row + k * a_col] * b[k * ldb + j];
      float& out = c[i * ldc + j];
      out = accumulate ? out + alpha * s : alpha * s;
    }
  }
}

// ---- bf16 operands ----------------------------------------------------------------------
// Only the functions inside the target region use AVX-512; small_gemm_bf16 calls them after
// checking the CPU at run time.
namespace {

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bf16")

// One MR × (NV·16) tile of C; the last vector's columns limited to `last` (a lane mask).
template <int MR, int NV>
void tile_bf16(int K2, float alpha, const BF16Pairs& a, const std::uint32_t* b, std::ptrdiff_t ldb,
               float* c, std::ptrdiff_t ldc, bool accumulate, __mmask16 last) {
  __m512 acc[MR][NV];
  for (int r = 0; r < MR; ++r) {
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  }
  for (int kk = 0; kk < K2; ++kk) {
    __m512bh bv[NV];
    for (int v = 0; v < NV; ++v) {
      bv[v] = (__m512bh)_mm512_loadu_si512(b + kk * ldb + v * kLanes);
    }
    for (int r = 0; r < MR; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(a.pair(r, kk)));
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], av, bv[v]);
    }
  }
  const __m512 scale = _mm512_set1_ps(alpha);
  for (int r = 0; r < MR; ++r) {
    for (int v = 0; v < NV; ++v) {
      float* cp = c + r * ldc + v * kLanes;
      const __mmask16 m = v + 1 == NV ? last : __mmask16{0xffff};
      __m512 out = _mm512_mul_ps(acc[r][v], scale);
      if (accumulate) out = _mm512_add_ps(out, _mm512_maskz_loadu_ps(m, cp));
      _mm512_mask_storeu_ps(cp, m, out);
    }
  }
}

template <int NV>
void column_block_bf16(int M, int K2, float alpha, const BF16Pairs& a, const std::uint32_t* b,
                       std::ptrdiff_t ldb, float* c, std::ptrdiff_t ldc, bool accumulate,
                       __mmask16 last) {
  constexpr int kRows = 8;
  int i = 0;
  for (; i + kRows <= M; i += kRows) {
    tile_bf16<kRows, NV>(K2, alpha, a.rows_from(i), b, ldb, c + i * ldc, ldc, accumulate, last);
  }
  with_tail_rows(M - i, [&](auto rows) {
    tile_bf16<decltype(rows)::value, NV>(K2, alpha, a.rows_from(i), b, ldb, c + i * ldc, ldc,
                                         accumulate, last);
  });
}

void small_gemm_bf16_avx512(int M, int N, int K2, float alpha, const BF16Pairs& a,
                            const std::uint32_t* b, std::ptrdiff_t ldb, float* c,
                            std::ptrdiff_t ldc, bool accumulate) {
  constexpr __mmask16 kAll = 0xffff;
  int j = 0;
  for (; j + 2 * kLanes <= N; j += 2 * kLanes) {
    column_block_bf16<2>(M, K2, alpha, a, b + j, ldb, c + j, ldc, accumulate, kAll);
  }
  for (; j < N; j += kLanes) {  // 16 columns, or the last 1-15 under a mask
    const int n = N - j < kLanes ? N - j : kLanes;
    const auto last = static_cast<__mmask16>((1u << n) - 1u);
    column_block_bf16<1>(M, K2, alpha, a, b + j, ldb, c + j, ldc, accumulate, last);
  }
}

#pragma GCC pop_options

float widen(std::uint32_t half) {
  const std::uint32_t u = half << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace

bool has_bf16_dot() {
  static const bool has = __builtin_cpu_supports("avx512bf16");
  return has;
}

void small_gemm_bf16(int M, int N, int K2, float alpha, const BF16Pairs& a, const std::uint32_t* b,
                     std::ptrdiff_t ldb, float* c, std::ptrdiff_t ldc, bool accumulate) {
  if (has_bf16_dot()) {
    small_gemm_bf16_avx512(M, N, K2, alpha, a, b, ldb, c, ldc, accumulate);
  } else {
    small_gemm_bf16_scalar(M, N, K2, alpha, a, b, ldb, c, ldc, accumulate);
  }
}

void small_gemm_bf16_scalar(int M, int N, int K2, float alpha, const BF16Pairs& a,
                            const std::uint32_t* b, std::ptrdiff_t ldb, float* c,
                            std::ptrdiff_t ldc, bool accumulate) {
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      float s = 0.0f;
      for (int kk = 0; kk < K2; ++kk) {
        const std::uint32_t ap = a.pair(i, kk), bp = b[kk * ldb + j];
        s += widen(ap & 0xffffu) * widen(bp & 0xffffu) + widen(ap >> 16) * widen(bp >> 16);
      }
      float& out = c[i * ldc + j];
      out = accumulate ? out + alpha * s : alpha * s;
    }
  }
}

}  // namespace bertfit::detail
