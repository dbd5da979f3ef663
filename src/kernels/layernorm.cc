// LayerNorm forward and backward over rows of C floats. Row statistics are accumulated in
// double (a sound two-pass mean/variance), the per-element arithmetic is float. Parameter
// gradients are column sums accumulated in double per column, row by row in order, so they
// are the same bits whatever the thread count.
#include "kernels/layernorm.h"

#include <cmath>
#include <vector>

#include "base/check.h"
#include "base/parallel.h"
#include "kernels/grain.h"

namespace bertfit {

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
  // dx = rstd · (g - mean(g) - xhat · mean(g · xhat)), g = dout · weight, xhat = (x - mean) · rstd.
  parallel_for(N, detail::rows_grain(C), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
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
      for (int c = 0; c < C; ++c) {
        const float xhat = (xr[c] - m) * rs;
        const float g = gr[c] * weight[c];
        dxr[c] = rs * (g - mean_g - xhat * mean_gx);
      }
    }
  });
  // dweight = Σ_rows dout · xhat, dbias = Σ_rows dout.
  detail::parallel_columns(N, C, [&](int c0, int c1) {
    const int w = c1 - c0;
    std::vector<double> acc_w(w, 0.0), acc_b(w, 0.0);
    double* aw = acc_w.data();
    double* ab = acc_b.data();
    for (std::int64_t r = 0; r < N; ++r) {
      const float* xr = x + r * C + c0;
      const float* gr = dout + r * C + c0;
      const float m = mean[r];
      const float rs = rstd[r];
#pragma omp simd
      for (int c = 0; c < w; ++c) {
        const float xhat = (xr[c] - m) * rs;
        aw[c] += static_cast<double>(gr[c]) * xhat;
        ab[c] += gr[c];
      }
    }
    for (int c = 0; c < w; ++c) {
      dweight[c0 + c] += static_cast<float>(aw[c]);
      dbias[c0 + c] += static_cast<float>(ab[c]);
    }
  });
}

}  // namespace bertfit
