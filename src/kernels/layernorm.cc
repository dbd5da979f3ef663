// LayerNorm forward and backward over rows of C floats. Row statistics are accumulated in
// double (a sound two-pass mean/variance), the per-element arithmetic is float. Parameter
// gradients are column sums in double: per fixed chunk of rows (row by row), then over the
// chunks in order, so they are the same bits whatever the thread count.
#include "kernels/layernorm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/check.h"
#include "base/parallel.h"
#include "kernels/grain.h"

namespace bertfit {
namespace {

// Rows per partial column sum of the parameter gradients (independent of the thread count).
constexpr std::int64_t kRowsPerPartial = 64;

}  // namespace

void layernorm_forward(float* out, float* mean, float* rstd, const float* x, const float* weight,
                       const float* bias, std::int64_t N, int C, float eps) {
  CHECK(N >= 0 && C > 0, "N = ", N, ", C = ", C);
  parallel_for(N, detail::rows_grain(C), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * C;
      float* yr = out + r * C;
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
      const float m = static_cast<float>(mu);
      const float rs = static_cast<float>(1.0 / std::sqrt(var + static_cast<double>(eps)));
      mean[r] = m;
      rstd[r] = rs;
      for (int c = 0; c < C; ++c) yr[c] = (xr[c] - m) * rs * weight[c] + bias[c];
    }
  });
}

void layernorm_backward(float* dx, float* dweight, float* dbias, const float* dout, const float* x,
                        const float* weight, const float* mean, const float* rstd, std::int64_t N,
                        int C) {
  CHECK(N >= 0 && C > 0, "N = ", N, ", C = ", C);
  // One pass over the rows: dx = rstd · (g - mean(g) - xhat · mean(g · xhat)), g = dout · weight,
  // xhat = (x - mean) · rstd, and the parameter gradients' partial column sums Σ dout · xhat,
  // Σ dout per fixed chunk of rows (in double); then the chunks' sums in chunk order. The
  // chunks do not depend on the thread count, so neither do the results.
  const std::int64_t chunks = (N + kRowsPerPartial - 1) / kRowsPerPartial;
  thread_local std::vector<double> partial;  // (chunks, 2, C): Σ dout·xhat, then Σ dout
  partial.assign(static_cast<std::size_t>(chunks) * 2 * C, 0.0);
  double* const part = partial.data();
  const std::int64_t grain = std::max<std::int64_t>(1, detail::rows_grain(C) / kRowsPerPartial);
  parallel_for(chunks, grain, [&](std::int64_t k0, std::int64_t k1) {
    for (std::int64_t k = k0; k < k1; ++k) {
      double* pw = part + k * 2 * C;
      double* pb = pw + C;
      const std::int64_t r1 = std::min(N, (k + 1) * kRowsPerPartial);
      for (std::int64_t r = k * kRowsPerPartial; r < r1; ++r) {
        const float* xr = x + r * C;
        const float* gr = dout + r * C;
        float* dxr = dx + r * C;
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
      }
    }
  });
  detail::parallel_columns(chunks, C, [&](int c0, int c1) {
    for (int c = c0; c < c1; ++c) {
      double w = 0.0, b = 0.0;
      for (std::int64_t k = 0; k < chunks; ++k) {
        w += part[k * 2 * C + c];
        b += part[k * 2 * C + C + c];
      }
      dweight[c] += static_cast<float>(w);
      dbias[c] += static_cast<float>(b);
    }
  });
}

}  // namespace bertfit
