// Register-blocked small matrix product: tiles of up to 8 rows × 32 columns of C held in
// registers (GCC vector types: 16 AVX-512 registers, or pairs of AVX registers elsewhere) while
// the K loop streams one row of B and broadcasts one element of A per tile row.
#include "kernels/small_gemm.h"

#include <cstring>

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
  const float* ai = a + i * a_row;
  float* ci = c + i * ldc;
  switch (M - i) {
    case 0:
      break;
    case 1:
      tile<1, NV>(K, alpha, ai, a_row, a_col, b, ldb, ci, ldc, accumulate);
      break;
    case 2:
      tile<2, NV>(K, alpha, ai, a_row, a_col, b, ldb, ci, ldc, accumulate);
      break;
    case 3:
      tile<3, NV>(K, alpha, ai, a_row, a_col, b, ldb, ci, ldc, accumulate);
      break;
    case 4:
      tile<4, NV>(K, alpha, ai, a_row, a_col, b, ldb, ci, ldc, accumulate);
      break;
    case 5:
      tile<5, NV>(K, alpha, ai, a_row, a_col, b, ldb, ci, ldc, accumulate);
      break;
    case 6:
      tile<6, NV>(K, alpha, ai, a_row, a_col, b, ldb, ci, ldc, accumulate);
      break;
    default:
      tile<7, NV>(K, alpha, ai, a_row, a_col, b, ldb, ci, ldc, accumulate);
      break;
  }
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

}  // namespace bertfit::detail
