// Residual add, bias gradient (column sums in double, thread-count independent), and row
// gather / scatter-add (scatter partitioned by columns: race-free even with repeated rows).
#include "kernels/elementwise.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "base/dtype.h"
#include "base/parallel.h"
#include "kernels/cast.h"
#include "kernels/grain.h"

namespace bertfit {

void add_forward(float* out, const float* a, const float* b, std::int64_t n) {
  CHECK(n >= 0, "n = ", n);
  parallel_for(n, detail::kMinWorkPerThread, [=](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) out[i] = a[i] + b[i];
  });
}

namespace {

// Column sums in double per column block; with `out` also the bf16 of every element.
template <bool kCast>
void bias_backward_impl(float* dbias, std::uint16_t* out, const float* dout, std::int64_t N,
                        int M) {
  CHECK(N >= 0 && M > 0, "N = ", N, ", M = ", M);
  detail::parallel_columns(N, M, [&](int c0, int c1) {
    const int w = c1 - c0;
    std::vector<double> acc(w, 0.0);
    double* a = acc.data();
    for (std::int64_t r = 0; r < N; ++r) {
      const float* row = dout + r * M + c0;
#pragma omp simd
      for (int c = 0; c < w; ++c) a[c] += row[c];
      if constexpr (kCast) {
        std::uint16_t* o = out + r * M + c0;
        for (int c = 0; c < w; ++c) o[c] = f32_to_bf16(row[c]);
      }
    }
    for (int c = 0; c < w; ++c) dbias[c0 + c] += static_cast<float>(a[c]);
  });
}

}  // namespace

void bias_backward(float* dbias, const float* dout, std::int64_t N, int M) {
  bias_backward_impl<false>(dbias, nullptr, dout, N, M);
}

void bias_backward_bf16(float* dbias, const std::uint16_t* dout, std::int64_t N, int M) {
  CHECK(N >= 0 && M > 0, "N = ", N, ", M = ", M);
  detail::parallel_columns(N, M, [&](int c0, int c1) {
    const int w = c1 - c0;
    std::vector<double> acc(w, 0.0);
    for (std::int64_t r = 0; r < N; ++r) {
      const std::uint16_t* row = dout + r * M + c0;
      for (int c = 0; c < w; ++c) acc[c] += bf16_to_f32(row[c]);
    }
    for (int c = 0; c < w; ++c) dbias[c0 + c] += static_cast<float>(acc[c]);
  });
}

void bias_backward_cast(float* dbias, std::uint16_t* dout_bf16, const float* dout, std::int64_t N,
                        int M) {
  bias_backward_impl<true>(dbias, dout_bf16, dout, N, M);
}

void gather_rows(float* out, const float* x, const std::int64_t* row_index, std::int64_t R, int C) {
  CHECK(R >= 0 && C > 0, "R = ", R, ", C = ", C);
  parallel_for(R, detail::rows_grain(C), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      CHECK(row_index[r] >= 0, "row_index[", r, "] = ", row_index[r]);
      const float* src = x + row_index[r] * C;
      std::copy(src, src + C, out + r * C);
    }
  });
}

namespace {

template <class E>
void pack_rows_impl(E* x, const std::int64_t* rows, std::int64_t R, int C) {
  // Row r moves down to r from rows[r] >= r: ascending order reads every source before it can
  // be overwritten. Distinct rows never overlap, so memcpy is safe.
  for (std::int64_t r = 0; r < R; ++r) {
    CHECK(rows[r] >= r && (r == 0 || rows[r] > rows[r - 1]), "pack_rows: rows[", r,
          "] = ", rows[r]);
    if (rows[r] != r) std::memcpy(x + r * C, x + rows[r] * C, sizeof(E) * C);
  }
}

template <class E>
void unpack_rows_impl(E* x, const std::int64_t* rows, std::int64_t R, std::int64_t N, int C) {
  CHECK(R <= N, "unpack_rows: R = ", R, " > N = ", N);
  // Descending: row r moves up to rows[r] >= r, above every source still to be read. Then the
  // gaps (padding rows) are zeroed.
  std::int64_t next = N;  // rows [rows[r] + 1, next) are padding
  for (std::int64_t r = R - 1; r >= 0; --r) {
    CHECK(rows[r] >= r && rows[r] < next, "unpack_rows: rows[", r, "] = ", rows[r]);
    if (rows[r] != r) std::memcpy(x + rows[r] * C, x + r * C, sizeof(E) * C);
    std::memset(x + (rows[r] + 1) * C, 0, sizeof(E) * C * (next - rows[r] - 1));
    next = rows[r];
  }
  std::memset(x, 0, sizeof(E) * C * next);
}

}  // namespace

void pack_rows(float* x, const std::int64_t* rows, std::int64_t R, int C) {
  pack_rows_impl(x, rows, R, C);
}
void pack_rows(std::uint16_t* x, const std::int64_t* rows, std::int64_t R, int C) {
  pack_rows_impl(x, rows, R, C);
}
void unpack_rows(float* x, const std::int64_t* rows, std::int64_t R, std::int64_t N, int C) {
  unpack_rows_impl(x, rows, R, N, C);
}
void unpack_rows(std::uint16_t* x, const std::int64_t* rows, std::int64_t R, std::int64_t N,
                 int C) {
  unpack_rows_impl(x, rows, R, N, C);
}

void scatter_add_rows(float* dx, const float* dout, const std::int64_t* row_index, std::int64_t R,
                      int C) {
  CHECK(R >= 0 && C > 0, "R = ", R, ", C = ", C);
  for (std::int64_t r = 0; r < R; ++r)
    CHECK(row_index[r] >= 0, "row_index[", r, "] = ", row_index[r]);
  detail::parallel_columns(R, C, [&](int c0, int c1) {
    for (std::int64_t r = 0; r < R; ++r) {
      float* dst = dx + row_index[r] * C;
      const float* src = dout + r * C;
      for (int c = c0; c < c1; ++c) dst[c] += src[c];
    }
  });
}

}  // namespace bertfit
