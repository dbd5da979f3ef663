// LayerNorm forward and backward over rows of C floats, alone or fused with the residual add,
// the dropout before it and (backward) the bias gradient of the product before that. Row
// statistics are accumulated in double (a sound two-pass mean/variance), the per-element
// arithmetic is float. Parameter gradients are column sums in double: per fixed chunk of rows
// (row by row), then over the chunks in order, so they are the same bits whatever the thread
// count.
#include "kernels/layernorm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/check.h"
#include "base/dtype.h"
#include "base/parallel.h"
#include "kernels/dropout_internal.h"
#include "kernels/grain.h"

namespace bertfit {
namespace {

// Rows per partial column sum of the parameter gradients (independent of the thread count).
constexpr std::int64_t kRowsPerPartial = 64;

// yr = LN(xr) for one row of C floats; its mean and 1/std go to m and rs.
void normalize_row(float* yr, float& m, float& rs, const float* xr, const float* weight,
                   const float* bias, int C, float eps) {
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int c = 0; c < C; ++c) sum += xr[c];
  const double mu = sum / C;
  double sq = 0.0;
#pragma omp simd reduction(+ : sq)
  for (int c = 0; c < C; ++c) {
    const double d = xr[c] - mu;
    sq += d * d;
  }
  const double var = sq / C;  // biased, as torch
  m = static_cast<float>(mu);
  rs = static_cast<float>(1.0 / std::sqrt(var + static_cast<double>(eps)));
  if (bias == nullptr) {  // LayerNorm(bias=False)
    for (int c = 0; c < C; ++c) yr[c] = (xr[c] - m) * rs * weight[c];
    return;
  }
  for (int c = 0; c < C; ++c) yr[c] = (xr[c] - m) * rs * weight[c] + bias[c];
}

}  // namespace

void layernorm_forward(float* out, float* mean, float* rstd, const float* x, const float* weight,
                       const float* bias, std::int64_t N, int C, float eps) {
  CHECK(N >= 0 && C > 0, "N = ", N, ", C = ", C);
  parallel_for(N, detail::rows_grain(C), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      normalize_row(out + r * C, mean[r], rstd[r], x + r * C, weight, bias, C, eps);
    }
  });
}

void dropout_add_layernorm_forward(float* out, float* res, float* mean, float* rstd, const float* y,
                                   const float* x, const float* weight, const float* bias,
                                   std::int64_t N, int C, float eps, float p, std::uint64_t key,
                                   std::int64_t first_row) {
  CHECK(N >= 0 && C > 0 && first_row >= 0, "N = ", N, ", C = ", C, ", first row ", first_row);
  const std::uint32_t threshold = detail::keep_threshold(p);
  const float scale = detail::keep_scale(p);
  parallel_for(N, detail::rows_grain(C), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      float* rr = res + r * C;
      const float* yr = y + r * C;
      const float* xr = x + r * C;
      if (p != 0.0f) {
        detail::drop_span(rr, yr, C, static_cast<std::uint64_t>((first_row + r) * C), threshold,
                          scale, key);
      } else if (rr != yr) {
        std::copy(yr, yr + C, rr);
      }
#pragma omp simd
      for (int c = 0; c < C; ++c) rr[c] = rr[c] + xr[c];
      normalize_row(out + r * C, mean[r], rstd[r], rr, weight, bias, C, eps);
    }
  });
}

void layernorm_backward(float* dx, float* dweight, float* dbias, const float* dout, const float* x,
                        const float* weight, const float* mean, const float* rstd, std::int64_t N,
                        int C) {
  layernorm_dropout_bias_backward(dx, dweight, dbias, nullptr, nullptr, nullptr, dout, x, weight,
                                  mean, rstd, N, C, 0.0f, 0);
}

void layernorm_dropout_bias_backward(float* dres, float* dweight, float* dbias, float* dy_f32,
                                     std::uint16_t* dy_bf16, float* ybias, const float* dout,
                                     const float* res, const float* weight, const float* mean,
                                     const float* rstd, std::int64_t N, int C, float p,
                                     std::uint64_t key) {
  CHECK(N >= 0 && C > 0, "N = ", N, ", C = ", C);
  CHECK(dy_f32 != dres || p == 0.0f, "the dropped gradient cannot overwrite the residual's");
  const std::uint32_t threshold = detail::keep_threshold(p);
  const float scale = detail::keep_scale(p);
  const bool branch = dy_f32 != nullptr || dy_bf16 != nullptr || ybias != nullptr;
  // One pass over the rows: dres = rstd · (g - mean(g) - xhat · mean(g · xhat)), g = dout ·
  // weight, xhat = (res - mean) · rstd; dy = Drop(dres) from it while the row is in L1; and the
  // partial column sums Σ dout · xhat, Σ dout (and Σ dy) per fixed chunk of rows (in double),
  // then the chunks' sums in chunk order. The chunks do not depend on the thread count, so
  // neither do the results.
  const int parts = ybias != nullptr ? 3 : 2;
  const std::int64_t chunks = (N + kRowsPerPartial - 1) / kRowsPerPartial;
  thread_local std::vector<double> partial;  // (chunks, parts, C)
  partial.assign(static_cast<std::size_t>(chunks) * parts * C, 0.0);
  double* const part = partial.data();
  const std::int64_t grain = std::max<std::int64_t>(1, detail::rows_grain(C) / kRowsPerPartial);
  parallel_for(chunks, grain, [&](std::int64_t k0, std::int64_t k1) {
    thread_local std::vector<float> row;  // dy's row when it is not kept in fp32
    if (branch && dy_f32 == nullptr) row.resize(static_cast<std::size_t>(C));
    for (std::int64_t k = k0; k < k1; ++k) {
      double* pw = part + k * parts * C;
      double* pb = pw + C;
      const std::int64_t r1 = std::min(N, (k + 1) * kRowsPerPartial);
      for (std::int64_t r = k * kRowsPerPartial; r < r1; ++r) {
        const float* xr = res + r * C;
        const float* gr = dout + r * C;
        float* dxr = dres + r * C;
        const float m = mean[r];
        const float rs = rstd[r];
        double sum_g = 0.0;
        double sum_gx = 0.0;
#pragma omp simd reduction(+ : sum_g, sum_gx)
        for (int c = 0; c < C; ++c) {
          const float xhat = (xr[c] - m) * rs;
          const float g = gr[c] * weight[c];
          sum_g += g;
          sum_gx += static_cast<double>(g) * xhat;
        }
        const float mean_g = static_cast<float>(sum_g / C);
        const float mean_gx = static_cast<float>(sum_gx / C);
#pragma omp simd
        for (int c = 0; c < C; ++c) {
          const float xhat = (xr[c] - m) * rs;
          const float g = gr[c] * weight[c];
          dxr[c] = rs * (g - mean_g - xhat * mean_gx);
          pw[c] += static_cast<double>(gr[c]) * xhat;
          pb[c] += gr[c];
        }
        if (!branch) continue;
        float* dyr = dy_f32 != nullptr ? dy_f32 + r * C : row.data();
        if (p != 0.0f) {
          detail::drop_span(dyr, dxr, C, static_cast<std::uint64_t>(r * C), threshold, scale, key);
        } else if (dyr != dxr) {
          std::copy(dxr, dxr + C, dyr);
        }
        if (dy_bf16 != nullptr) {
          std::uint16_t* o = dy_bf16 + r * C;
          for (int c = 0; c < C; ++c) o[c] = f32_to_bf16(dyr[c]);
        }
        if (ybias != nullptr) {
          double* py = pb + C;
#pragma omp simd
          for (int c = 0; c < C; ++c) py[c] += dyr[c];
        }
      }
    }
  });
  detail::parallel_columns(chunks, C, [&](int c0, int c1) {
    for (int c = c0; c < c1; ++c) {
      double w = 0.0, b = 0.0, y = 0.0;
      for (std::int64_t k = 0; k < chunks; ++k) {
        w += part[k * parts * C + c];
        b += part[k * parts * C + C + c];
        if (parts == 3) y += part[k * parts * C + 2 * C + c];
      }
      dweight[c] += static_cast<float>(w);
      if (dbias != nullptr) dbias[c] += static_cast<float>(b);
      if (ybias != nullptr) ybias[c] += static_cast<float>(y);
    }
  });
}

}  // namespace bertfit
